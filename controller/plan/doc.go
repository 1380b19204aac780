// Package plan is a VM's reconcile without its writes: observe → decide → plan (DESIGN.md §4).
// The reconciler (controller/vm) carries a Plan out; the dry run (controller/dryrun) and
// ipamctl return it. Compute writes nothing.
//
//   - observe (observe.go) reads everything through a client.Reader — the manager's cache,
//     or the cache with a dry run's objects laid over it — and through field indexes: the VM,
//     its namespace, its decision record, networks, the IPAddresses it owns or names, the VMs
//     and records contending for the same static IPAddresses (holders.go), its launcher pods
//     (what is applied) and the policy snapshot.
//   - decide (decide.go) builds one evaluator.Input per additional interface (and per
//     interface removed from the spec that the running pod still carries) and asks the
//     policy snapshot for a Decision.
//   - plan (plan.go) turns the decisions into the Auto IPAddresses to create
//     (ipaddresses.go), the VM's VirtualMachineIPAM (record.go), the releases of addresses
//     nothing wants any more (releases.go) and, through the consumer package, what the VM
//     looks like once its record is applied (results.go).
package plan
