package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// IPAddressType says who picks the address: SDN (Auto) or the user (Static).
// +kubebuilder:validation:Enum=Auto;Static
type IPAddressType string

// IPAddress types (SDN).
const (
	IPAddressTypeAuto   IPAddressType = "Auto"
	IPAddressTypeStatic IPAddressType = "Static"
)

// IPAddressPhase is SDN's summary of an IPAddress.
type IPAddressPhase string

// IPAddress phases (SDN).
const (
	IPAddressPhasePending   IPAddressPhase = "Pending"
	IPAddressPhaseAllocated IPAddressPhase = "Allocated"
)

// Condition type and reasons SDN sets on an IPAddress.
const (
	// ConditionAllocated is True once the address is reserved in the pool.
	ConditionAllocated = "Allocated"
	// ReasonNoFreeIPAddress is the Allocated=False reason when the pool is exhausted.
	ReasonNoFreeIPAddress = "NoFreeIPAddress"
)

// IPAddressNetworkRef names the network an IPAddress belongs to. A Network is looked up in
// the IPAddress's namespace.
type IPAddressNetworkRef struct {
	// +kubebuilder:validation:Enum=Network;ClusterNetwork
	Kind string `json:"kind"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// StaticIP is the address a Static IPAddress asks for.
type StaticIP struct {
	// IP is the requested address; it must lie in the network's pool.
	IP string `json:"ip"`
}

// IPAddressSpec is what the owner of an IPAddress asks SDN for.
type IPAddressSpec struct {
	Type       IPAddressType       `json:"type"`
	NetworkRef IPAddressNetworkRef `json:"networkRef"`
	// Static is required for type Static.
	// +optional
	Static *StaticIP `json:"static,omitempty"`
}

// IPAddressStatus is SDN's answer.
type IPAddressStatus struct {
	// Address is the allocated address, e.g. 10.10.0.7.
	// +optional
	Address string `json:"address,omitempty"`
	// Network is the subnet of Address in CIDR notation.
	// +optional
	Network string `json:"network,omitempty"`
	// +optional
	Phase IPAddressPhase `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAddress is a claim on one address of a network's pool (namespaced, also for
// ClusterNetworks).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.spec.networkRef.name`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
type IPAddress struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressSpec   `json:"spec"`
	Status IPAddressStatus `json:"status,omitempty"`
}

// IPAddressList is a list of IPAddresses.
//
// +kubebuilder:object:root=true
type IPAddressList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddress `json:"items"`
}
