// Package controller wires vmipam's reconcilers into a controller-runtime manager (manager.go)
// and shapes the manager's cache: what vmipam keeps of the objects it watches (cache.go,
// intern.go, mapintern.go) and how a VM is mapped to a shard (shard.go).
//
// The work is done in sub-packages, each with one job: scheme (the kinds vmipam knows, shared
// with ipamctl), index (the field indexes every reader shares), naming (deterministic object
// and interface names), policy (ClusterIPAMPolicy compilation, status and the published policy
// snapshot), plan (a VM's observe → decide → plan, writing nothing), vm (the VirtualMachine
// reconciler: carries a plan out — Auto IPAddresses and the decision record), dryrun (the
// Evaluation API over plan), webhook (policy admission) and metrics. Dependencies point down:
//
//	controller → vm → plan → evaluator → policies
//	controller → policy → evaluator
//	controller → dryrun → plan
//	plan → policies/consumer, naming, index
package controller
