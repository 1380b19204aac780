// Package env starts a real control plane for vmipam's tests and the local sandbox: etcd and
// kube-apiserver through controller-runtime's envtest, and optionally a
// kube-controller-manager running only the garbage-collector and namespace controllers (plain
// envtest has no garbage collection). The binaries come from `make envtest-bins`, which
// builds them from the Go module proxy into a cache outside the checkout.
package env
