// Package scale measures vmipam on a real kube-apiserver and etcd, with the SDN and
// virtualization-controller stand-ins, at N VMs (default 1,000) with two pooled additional networks each:
// convergence time against the floor (a bare client doing the minimal writes at the same
// QPS, burst and concurrency), API writes per VM against the minimum, writes on a full resync,
// policy-change fan-out precision, memory, and hotplug latency.
//
// The controller runs as its own process (the real cmd/ipam-controller binary) under its own
// user, and every write it makes is counted from the API server's audit log, so nothing in
// the measurement is the controller's word about itself.
//
// `go test ./test/scale` runs the small smoke version (N=50, correctness only, no timing
// assertions) that `make test` includes; `make bench` runs the full suite and writes
// docs/BENCHMARKS.md.
package scale
