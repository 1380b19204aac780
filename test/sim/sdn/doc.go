// Package sdn is a STAND-IN for the SDN module. It is NOT the SDN module and NOT part of vmipam:
// it exists only so vmipam's tests and the local sandbox have something that answers the way
// the SDN module does (DESIGN.md §6). Never deploy it to a real cluster.
//
// The Simulator runs four small controller-runtime controllers in the manager it is set up with:
//
//   - sdn-sim-ipaddress allocates IPAddresses from the pool of their network (Auto: the next free
//     address; Static: the requested one if it is in the pool and free), sets status.address,
//     status.network, status.phase and the Allocated condition (reasons Allocated,
//     NoFreeIPAddress, IPOutOfRange, IPAlreadyAllocated, NetworkNotFound, NoIPAMPool, …),
//     retries Pending IPAddresses periodically and when an address of their pool is released,
//     and keeps a released address for its last holder's name for the pool's leaseTTL.
//   - sdn-sim-pod answers the networks-spec annotation of launcher pods (label
//     vm.kubevirt.io/name) with networks-status: one configured NIC per entry, with a stable
//     MAC and the addresses of its Allocated IPAddresses.
//   - sdn-sim-network and sdn-sim-clusternetwork set Ready=True on networks that have no Ready
//     condition yet, unless they carry the annotation AnnotationHoldNotReady: "true".
//
// Choosing an address is serialized by a mutex in the Simulator and the choice is reserved at
// once in memory (a ledger), so a cache that lags behind the simulator's own writes cannot hand
// out an address twice; the status writes then run outside the lock, several at a time, with
// optimistic locking, and a failed write gives its reservation back. The ledger is indexed by
// pool and address, so an allocation costs one lookup per address of the pool it steps over and
// never lists the cluster's IPAddresses (that made 10,000 VMs quadratic). It is seeded from the
// Allocated IPAddresses of the cache before the first allocation, so it survives a restart,
// except for leases, which a restart forgets.
package sdn
