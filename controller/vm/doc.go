// Package vm is the VirtualMachine reconciler: per VM, controller/plan computes what to do
// (observe → decide → plan), and this package carries it out (DESIGN.md §4): create the
// interfaces' Auto IPAddresses, then write the VM's decision record (VirtualMachineIPAM) —
// created, or merge-patched under the resourceVersion read, only when it changed — then
// announce the decisions as events, then delete the Auto IPAddresses whose release is due,
// each with UID and resourceVersion preconditions after a live read of the VM and its pods.
// It writes no VirtualMachine, no VM status and no pod: the virtualization controller applies
// the record (docs/INTEGRATION.md).
//
//   - act.go: the writes of one reconcile, in that order.
//   - expect.go: the writes the cache does not show yet (created IPAddresses, record writes),
//     so that a lagging cache never makes the next reconcile write again.
//   - watches.go: what wakes a VM — its spec, phase and MACs, its pods' networks-spec, its
//     record, the IPAddresses and networks it uses, the records contending for its statics —
//     with predicates that drop changes vmipam does not read.
//   - policywatch.go: a policy change re-enqueues only the VMs whose decisions can change,
//     in turn with every other change.
//   - observation.go: how long records wait for the virtualization controller to observe them
//     (the vmipam_records_unobserved metric).
package vm
