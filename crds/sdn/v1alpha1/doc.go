// Package v1alpha1 holds Go types for the SDN module's API (group network.deckhouse.io,
// version v1alpha1): Network, ClusterNetwork, IPAddressPool, ClusterIPAddressPool, IPAddress
// and IPAddressLease, plus the launcher-pod annotations SDN reads and writes.
//
// The SDN module's CRDs are not public. These types hold every field its documentation names
// (../shared/upstream/sdn.md of the project), with names exactly as documented, so that
// manifests written for a real cluster (its e2e tests' among them) apply to a test cluster
// unchanged; they validate little beyond what SDN documents (enums, spec.ipam being
// immutable). The CRDs generated from them in internal/thirdpartycrds serve the tests, the
// local sandbox and the dry run's offline checks only. In a real cluster the SDN module
// installs its own CRDs.
//
// +kubebuilder:object:generate=true
// +groupName=network.deckhouse.io
package v1alpha1
