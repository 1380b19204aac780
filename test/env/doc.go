// Package env starts a real control plane for vmipam's tests and the local sandbox: etcd and
// kube-apiserver through controller-runtime's envtest, and optionally a
// kube-controller-manager running only the garbage-collector and namespace controllers (plain
// envtest has no garbage collection). The binaries come from `make envtest-bins`, which
// builds them from the Go module proxy into a cache outside the checkout.
//
// The kube-apiserver runs as a front proxy for aggregated APIs. No kube-proxy runs here, so
// a Service's ClusterIP leads nowhere; a local server is reached through an ExternalName
// Service for localhost (LocalService, ApplyLocalService), with a serving certificate for the
// Service's name (ServingCert) — the same path, name check and caBundle as on a cluster.
// RegisterAPIService registers an aggregated API served that way and waits until it is
// Available.
package env
