// Package integration holds vmipam's controller behaviour suites: Ginkgo specs against a real
// kube-apiserver and etcd (envtest), with kube-controller-manager's garbage collector and the
// SDN and virtualization-controller stand-ins running beside the controller. Each spec works in a namespace of
// its own and cluster-scoped objects carry that namespace's name, so specs never interfere.
package integration
