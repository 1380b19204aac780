// Package v1alpha1 holds Go types for the SDN module's API (group network.deckhouse.io,
// version v1alpha1): Network, ClusterNetwork, IPAddressPool, ClusterIPAddressPool and
// IPAddress, plus the launcher-pod annotations SDN reads and writes.
//
// The SDN module's CRDs are not public. These types are trimmed to the fields vmipam reads or
// writes, with names exactly as DESIGN.md §2.2 gives them; the CRDs generated from them in
// internal/thirdpartycrds serve the tests and the local sandbox only. In a real cluster the SDN module
// installs its own CRDs.
//
// +kubebuilder:object:generate=true
// +groupName=network.deckhouse.io
package v1alpha1
