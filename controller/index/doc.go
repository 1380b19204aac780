// Package index defines the cache field indexes vmipam's readers share, so that every lookup
// in a reconcile is an indexed cache read: VMs by the networks and static IPAddresses they
// name, IPAddresses by owning VM, launcher pods by VM and by the IPAddresses they carry,
// decision records by the IPAddresses they attach or hand over. The two lookups of one VM's
// own objects — its IPAddresses, its launcher pods — use bucketed indexes (Buckets values,
// across namespaces) through OwnedIPAddresses and LauncherPods, which filter the bucket: an
// index keyed by the VM keeps a Go map per VM. Setup registers them with any
// client.FieldIndexer: the manager's cache through package cacheindex (one key per value,
// where controller-runtime's IndexField keys each twice), or the dry run's overlay reader.
package index
