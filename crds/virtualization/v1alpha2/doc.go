// Package v1alpha2 holds Go types for the parts of the virtualization platform's API
// (group virtualization.deckhouse.io, version v1alpha2) that vmipam reads or writes:
// VirtualMachine and VirtualMachineOperation.
//
// The types are trimmed. Field names and validation of the fields kept follow the published
// CRDs (../shared/upstream/); everything else in those objects is left alone by vmipam, which
// only ever merge-patches the fields named here. The trimmed CRDs generated from these types
// (internal/thirdpartycrds) serve tests and the sandbox; the compatibility suite installs the real ones.
//
// +kubebuilder:object:generate=true
// +groupName=virtualization.deckhouse.io
package v1alpha2
