// Package index defines the cache field indexes vmipam's readers share, so that every lookup
// in a reconcile is an indexed cache read: VMs by the networks and static IPAddresses they
// name, IPAddresses by owning VM, launcher pods by VM and by the IPAddresses they carry,
// decision records by the IPAddresses they attach or hand over. CacheIndexer registers them on the
// manager's cache with one key per value (controller-runtime's IndexField keys each twice).
package index
