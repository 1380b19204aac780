// Package sandbox runs vmipam locally with nothing but the cached control-plane binaries: a
// real kube-apiserver, etcd and garbage collector, the CRDs, the default policy, the samples,
// the vmipam controller and the SDN and virtualization-controller stand-ins, and prints what happened to each
// VM interface. cmd/ipam-sandbox is its command line; `make demo` runs it.
package sandbox
