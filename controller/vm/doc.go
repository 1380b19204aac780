// Package vm is the VirtualMachine reconciler: per VM, observe → decide → act → one status
// write (DESIGN.md §4).
//
//   - observe (observe.go) reads everything from the cache through field indexes: the VM, its
//     namespace, networks, the IPAddresses it owns or names, the VMs contending for the same
//     static IPAddresses, its launcher pods and the policy snapshot.
//   - decide (decide.go) builds one evaluator.Input per additional interface and asks the
//     policy snapshot for a Decision.
//   - act (act.go) creates the interface's Auto IPAddress under its deterministic name,
//     deletes the Auto IPAddresses no interface wants, and writes networks-spec on the VM and
//     (as far as hotplug allows) on the running launcher pods.
//   - status (status.go) is a pure function of what was observed and done: status.networks,
//     NetworkReady and AwaitingRestartToApplyConfiguration, written in one optimistic-lock
//     merge patch only when something changed.
package vm
