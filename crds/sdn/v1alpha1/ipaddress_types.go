package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// Condition types and reasons SDN sets on an IPAddress. These two reasons are the only ones
// SDN documents (or the virtualization controller reads); any other reason of Allocated=False
// is SDN's word for a refusal nobody has documented, and nothing may key on it.
const (
	// ConditionAllocated is True once the address is reserved in the pool.
	ConditionAllocated = "Allocated"
	// ReasonIPAddressAllocated is the Allocated=True reason.
	ReasonIPAddressAllocated = "IPAddressAllocated"
	// ReasonNoFreeIPAddress is the Allocated=False reason when the pool is exhausted.
	ReasonNoFreeIPAddress = "NoFreeIPAddress"
	// ConditionAttached is set by SDN's node agent once the address is configured in a pod
	// (status.usedByPods names the pods). Its reasons are not documented.
	ConditionAttached = "Attached"
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
	// Network is the subnet of Address in CIDR notation (the pool's pools[].network).
	// +optional
	Network string `json:"network,omitempty"`
	// Routes are the routes of the address's pools[] entry.
	// +optional
	Routes []Route `json:"routes,omitempty"`
	// +optional
	Phase IPAddressPhase `json:"phase,omitempty"`
	// Conditions include Allocated and Attached.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// UsedByPods are the pods the address is configured in, set by SDN's node agent with the
	// Attached condition. SDN does not document an entry's shape, so the CRD accepts any; the
	// SDN stand-in writes PodRef objects.
	// +optional
	UsedByPods []apiextensionsv1.JSON `json:"usedByPods,omitempty"`
}

// Answered reports whether SDN has written any status on the IPAddress: a phase, a condition
// or an address. SDN's first write on a new IPAddress sets its phase and its Allocated
// condition (Allocated, or Pending with a reason), so an empty status means SDN has not looked
// at it yet.
func (s *IPAddressStatus) Answered() bool {
	return s.Phase != "" || len(s.Conditions) > 0 || s.Address != ""
}

// PodRef names a pod in status.usedByPods, as the SDN stand-in writes it. (Its fields are in
// the order the API server serves them, so that an entry read back equals the one written.)
type PodRef struct {
	// Name is the pod's name.
	Name string `json:"name"`
	// Namespace is the pod's namespace.
	Namespace string `json:"namespace"`
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
