package main

// RBAC for what main wires beside the reconcilers: leader election holds a Lease in the
// controller's own namespace and records its transitions as core events there. The
// namespace is the chart's; the chart renders these Roles into the release namespace.
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=vmipam-system,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=vmipam-system,resources=events,verbs=create;patch
