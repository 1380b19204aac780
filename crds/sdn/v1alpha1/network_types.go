package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Kinds of SDN networks, as VirtualMachine spec.networks[].type and IPAddress
// spec.networkRef.kind spell them.
const (
	KindNetwork        = "Network"
	KindClusterNetwork = "ClusterNetwork"
)

// ConditionReady is the condition type SDN sets on a Network or ClusterNetwork that can carry
// traffic.
const ConditionReady = "Ready"

// NetworkSpec is the part of a network's spec vmipam reads.
type NetworkSpec struct {
	// IPAM, when set with a non-empty pool name, turns on address management for the network.
	// +optional
	IPAM *NetworkIPAM `json:"ipam,omitempty"`
}

// NetworkIPAM names the pool a network allocates addresses from.
type NetworkIPAM struct {
	// IPAddressPoolRef refers to an IPAddressPool (same namespace) or a ClusterIPAddressPool.
	IPAddressPoolRef PoolRef `json:"ipAddressPoolRef"`
}

// PoolRef refers to an address pool by kind (IPAddressPool or ClusterIPAddressPool) and name.
type PoolRef struct {
	// +kubebuilder:validation:Enum=IPAddressPool;ClusterIPAddressPool
	Kind string `json:"kind"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// NetworkStatus is the part of a network's status vmipam reads.
type NetworkStatus struct {
	// Conditions include Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PoolRef returns the pool the network allocates from, or nil when the network has no IPAM
// pool (an empty name counts as none, as in SDN).
func (s *NetworkSpec) PoolRef() *PoolRef {
	if s.IPAM == nil || s.IPAM.IPAddressPoolRef.Name == "" {
		return nil
	}
	return &s.IPAM.IPAddressPoolRef
}

// Network is a namespaced SDN network; VMs of the same namespace attach to it by name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Network struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NetworkSpec   `json:"spec,omitempty"`
	Status NetworkStatus `json:"status,omitempty"`
}

// NetworkList is a list of Networks.
//
// +kubebuilder:object:root=true
type NetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Network `json:"items"`
}

// ClusterNetwork is a cluster-scoped SDN network any namespace's VMs may attach to.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
type ClusterNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NetworkSpec   `json:"spec,omitempty"`
	Status NetworkStatus `json:"status,omitempty"`
}

// ClusterNetworkList is a list of ClusterNetworks.
//
// +kubebuilder:object:root=true
type ClusterNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterNetwork `json:"items"`
}
