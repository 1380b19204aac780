// Package controller wires vmipam's reconcilers into a controller-runtime manager.
//
// The work is done in sub-packages, each with one job: scheme (the kinds vmipam knows, shared
// with ipamctl), index (the field indexes every reader
// shares), naming (deterministic object and interface names), policy (ClusterIPAMPolicy
// compilation, status and the published policy snapshot) and vm (the VirtualMachine
// reconciler: observe → decide → act → one status write). Dependencies point down:
// controller → vm → policy → evaluator → policies.
package controller
