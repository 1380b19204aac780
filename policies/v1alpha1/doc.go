// Package v1alpha1 is vmipam's own API, group ipam.virtualization.deckhouse.io, version
// v1alpha1: ClusterIPAMPolicy, the cluster-scoped CEL policy that decides, per VM interface,
// how the interface gets its address (Auto, Static or None), whether it is skipped and why,
// and whether a change may be applied to a running VM (DESIGN.md §2.1); and VirtualMachineIPAM,
// the per-VM decision record vmipam writes and the virtualization controller applies
// (DESIGN.md §2.3, docs/INTEGRATION.md).
//
// +kubebuilder:object:generate=true
// +groupName=ipam.virtualization.deckhouse.io
package v1alpha1
