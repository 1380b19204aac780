// Package controller wires vmipam's reconcilers, its policy registry and its dry-run API server
// into a controller-runtime manager, and sets up logging. It holds wiring only.
//
// The work is done in sub-packages, each with one job: reads (what vmipam reads of the
// objects it watches: the cache transforms and the watches' change test), shard (a
// deployment limited to some namespaces), scheme (the kinds vmipam knows, shared
// with ipamctl), index (the field indexes every reader shares), naming (deterministic object
// and interface names), policy (ClusterIPAMPolicy compilation, status and the published policy
// snapshot), plan (a VM's observe → decide → plan, writing nothing), vm (the VirtualMachine
// reconciler: carries a plan out — Auto IPAddresses and the decision record), backlog (when
// SDN last answered an IPAddress, and a notice when it falls quiet), firstseen (when this
// process first saw an object the API server dated after its clock), dryrun (the
// Evaluation API over plan), webhook (policy admission) and metrics. Dependencies point down:
//
//	controller → vm → plan → evaluator → policies
//	vm → firstseen
//	controller → policy → evaluator
//	controller → dryrun → plan
//	controller → backlog
//	plan → policies/consumer, naming, index
//	vm → reads
package controller
