// Package index defines the cache field indexes vmipam's readers share, so that every lookup
// in a reconcile is an indexed cache read: VMs by the networks and static IPAddresses they
// name, IPAddresses by owning VM, launcher pods by VM and by the IPAddresses they carry,
// decision records by the IPAddresses they attach or hand over. Setup registers them with any
// client.FieldIndexer: the manager's cache through package cacheindex (one key per value,
// where controller-runtime's IndexField keys each twice), or the dry run's overlay reader.
package index
