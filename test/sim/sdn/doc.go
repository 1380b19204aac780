// Package sdn is a STAND-IN for the SDN module. It is NOT the SDN module and NOT part of vmipam:
// it exists only so vmipam's tests and the local sandbox have something that answers the way
// the SDN module does (DESIGN.md §6). It follows what is documented of SDN
// (../shared/upstream/sdn.md of the project), not what would be convenient for the tests.
// Never deploy it to a real cluster.
//
// The Simulator runs six small controller-runtime controllers in the manager it is set up with:
//
//   - sdn-sim-ipaddress allocates IPAddresses from the pool of their network (Auto: the next free
//     address; Static: the requested one if it is in the pool and free) and sets status.address,
//     status.network, status.routes (the pools[] entry's), status.phase and the Allocated
//     condition: True with reason IPAddressAllocated, False with NoFreeIPAddress when the pool
//     is exhausted. A pools[] entry without ranges hands out its whole CIDR but the network and
//     broadcast addresses (a /31 both of its addresses, a /32 its one address: RFC 3021); no
//     address is withheld as a gateway. SDN is IPv4-only, and so is the stand-in. It keeps one
//     IPAddressLease per allocated address, retries Pending IPAddresses periodically and when
//     an address of their pool is released.
//   - sdn-sim-attach plays SDN's node agents: it sets an allocated IPAddress's condition
//     Attached and status.usedByPods from the launcher pods whose networks-status reports the
//     address configured. It has its own queue and workers (AttachWorkers), as the agents are
//     processes of their own beside the allocator: an attachment never waits behind the
//     allocations of other IPAddresses, nor they behind it.
//   - sdn-sim-lease orphans (status.orphaningTimestamp) the lease of an IPAddress that is gone;
//     the orphaned lease keeps its address from every new IPAddress — Static or Auto, of any
//     name, the deleted one's included — for its spec.ttl (the pool's leaseTTL), then is
//     deleted. A lease deleted by hand frees its address at once (SDN's e2e tests do that).
//     Leases are objects, so they survive a restart of the stand-in.
//   - sdn-sim-pod answers the networks-spec annotation of launcher pods (label
//     vm.kubevirt.io/name) with networks-status: one NIC per entry, Configured (reason
//     InterfaceConfiguredSuccessfully) and Negotiated (reason Up), with a stable MAC and the
//     configs (address, network, routes) of its Allocated IPAddresses.
//   - sdn-sim-network and sdn-sim-clusternetwork set Ready=True (reason NetworkReady) on
//     networks that have no Ready condition yet, unless they carry the annotation
//     AnnotationHoldNotReady: "true". That spec.ipam cannot change is the trimmed CRDs' rule
//     (internal/thirdpartycrds), as SDN refuses the edit.
//
// # The stand-in's own words
//
// SDN documents two reasons of Allocated (IPAddressAllocated, NoFreeIPAddress) and none of
// Attached. Where the stand-in must refuse an IPAddress for another cause, or give Attached a
// reason, it uses words of its own, all beginning with "StandIn" so that a status showing one
// is known for the stand-in's: StandInIPOutOfRange, StandInIPAddressInUse,
// StandInIPAddressLeased, StandInInvalidIPAddress, StandInNetworkNotFound, StandInNoIPAMPool,
// StandInInvalidPool (Allocated=False), StandInConfiguredInPod and StandInNotConfiguredInPod
// (Attached). Real SDN says something else, or nothing, in these cases: no vmipam code, default
// policy, sample or document keys on them —
// grep -rE 'StandIn(IP|Invalid|Network|NoIPAM|Configured|NotConfigured)' finds them in
// test/sim/sdn only. The lease annotations (AnnotationLeasePool, …) are the stand-in's
// bookkeeping too: SDN does not document how a lease names its IPAddress.
//
// # Concurrency and restarts
//
// Choosing an address is serialized by a mutex in the Simulator and the choice is reserved at
// once in memory (a ledger), so a cache that lags behind the simulator's own writes cannot hand
// out an address twice; the status writes then run outside the lock, several at a time, with
// optimistic locking, and a failed write gives its reservation back. The ledger is indexed by
// pool and address, so an allocation costs one lookup per address of the pool it steps over and
// never lists the cluster's IPAddresses (that made 10,000 VMs quadratic). It is seeded from the
// Allocated IPAddresses and the IPAddressLeases of the cache before the first allocation, so
// it survives a restart, leases included.
package sdn
