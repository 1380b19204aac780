// Package golden checks that the four ways vmipam decides agree: the evaluator directly (on
// policy test suites), `ipamctl evaluate` (offline, run in-process on a snapshot of the
// world), the dry-run API (an Evaluation created through the kube-apiserver by a
// ServiceAccount with only the shipped evaluator role, on the live cluster) and a real
// reconcile (what the controller wrote on the VM), for the cases in testdata/ (see
// testdata/README.md). It runs its own control plane (envtest) with vmipam, its dry-run API
// server registered as an APIService, and the SDN and virtualization-controller stand-ins.
package golden
