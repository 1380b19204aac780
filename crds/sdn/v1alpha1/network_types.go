package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kinds of SDN networks, as VirtualMachine spec.networks[].type and IPAddress
// spec.networkRef.kind spell them.
const (
	KindNetwork        = "Network"
	KindClusterNetwork = "ClusterNetwork"
)

// ConditionReady is the condition type SDN sets on a Network or ClusterNetwork that can carry
// traffic.
const ConditionReady = "Ready"

// ReasonNetworkReady is the reason of Ready=True on a network (SDN).
const ReasonNetworkReady = "NetworkReady"

// ClusterNetworkType is how a ClusterNetwork reaches the nodes' parent interfaces: VLAN (tagged
// with spec.vlan.id) or Access (untagged).
// +kubebuilder:validation:Enum=VLAN;Access
type ClusterNetworkType string

// ClusterNetwork types (SDN).
const (
	ClusterNetworkTypeVLAN   ClusterNetworkType = "VLAN"
	ClusterNetworkTypeAccess ClusterNetworkType = "Access"
)

// ClusterNetworkSpec is a ClusterNetwork's spec: every field SDN documents. vmipam reads ipam
// and type.
type ClusterNetworkSpec struct {
	// Type is VLAN or Access.
	// +optional
	Type ClusterNetworkType `json:"type,omitempty"`
	// VLAN is the tag of a VLAN network.
	// +optional
	VLAN *VLAN `json:"vlan,omitempty"`
	// ParentNodeNetworkInterfaces selects the nodes' interfaces (NodeNetworkInterface objects)
	// the network is built on.
	// +optional
	ParentNodeNetworkInterfaces *ParentNodeNetworkInterfaces `json:"parentNodeNetworkInterfaces,omitempty"`
	// IPAM, when set with a non-empty pool name, turns on address management for the network.
	// SDN refuses to change it: a network gets another pool by being deleted and created again.
	// +optional
	IPAM *NetworkIPAM `json:"ipam,omitempty"`
}

// NetworkSpec is a namespaced Network's spec: every field SDN documents. vmipam reads ipam.
type NetworkSpec struct {
	// NetworkClass names the NetworkClass (cluster-scoped) the network is built from. SDN
	// requires it; the trimmed CRD does not, so that manifests written before it was known
	// still apply in the tests.
	// +optional
	NetworkClass string `json:"networkClass,omitempty"`
	// VLAN is the network's tag; when unset SDN picks one from the class's pool.
	// +optional
	VLAN *VLAN `json:"vlan,omitempty"`
	// IPAM, when set with a non-empty pool name, turns on address management for the network.
	// SDN refuses to change it: a network gets another pool by being deleted and created again.
	// +optional
	IPAM *NetworkIPAM `json:"ipam,omitempty"`
}

// VLAN is a VLAN tag.
type VLAN struct {
	// ID is the VLAN ID.
	ID int32 `json:"id"`
}

// ParentNodeNetworkInterfaces selects node network interfaces by label.
type ParentNodeNetworkInterfaces struct {
	// LabelSelector selects NodeNetworkInterface objects.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
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

// NetworkStatus is a network's status as SDN documents it; vmipam reads the Ready condition.
type NetworkStatus struct {
	// BridgeName is the bridge SDN made on the nodes, e.g. d8-br-900.
	// +optional
	BridgeName string `json:"bridgeName,omitempty"`
	// VLANID is the VLAN SDN chose (Network).
	// +optional
	VLANID *int32 `json:"vlanID,omitempty"`
	// NodeAttachementsCount is how many nodes the network is attached to (SDN's spelling).
	// +optional
	NodeAttachementsCount *int32 `json:"nodeAttachementsCount,omitempty"`
	// ReadyNodeAttachementsCount is how many of those attachments are ready (SDN's spelling).
	// +optional
	ReadyNodeAttachementsCount *int32 `json:"readyNodeAttachementsCount,omitempty"`
	// ObservedGeneration is the generation SDN last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions include Ready (reason NetworkReady) and AllNodeAttachementsAreReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// poolRef is ipam's pool, or nil when there is none (an empty name counts as none, as in SDN).
func poolRef(ipam *NetworkIPAM) *PoolRef {
	if ipam == nil || ipam.IPAddressPoolRef.Name == "" {
		return nil
	}
	return &ipam.IPAddressPoolRef
}

// PoolRef returns the pool the network allocates from, or nil when the network has no IPAM
// pool (an empty name counts as none, as in SDN).
func (s *NetworkSpec) PoolRef() *PoolRef { return poolRef(s.IPAM) }

// PoolRef returns the pool the network allocates from, or nil when the network has no IPAM
// pool (an empty name counts as none, as in SDN).
func (s *ClusterNetworkSpec) PoolRef() *PoolRef { return poolRef(s.IPAM) }

// Network is a namespaced SDN network; VMs of the same namespace attach to it by name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.ipam)) ? (has(oldSelf.spec) && has(oldSelf.spec.ipam) && self.spec.ipam == oldSelf.spec.ipam) : !(has(oldSelf.spec) && has(oldSelf.spec.ipam))",message="spec.ipam is immutable: delete the network and create it again"
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
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.ipam)) ? (has(oldSelf.spec) && has(oldSelf.spec.ipam) && self.spec.ipam == oldSelf.spec.ipam) : !(has(oldSelf.spec) && has(oldSelf.spec.ipam))",message="spec.ipam is immutable: delete the network and create it again"
type ClusterNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterNetworkSpec `json:"spec,omitempty"`
	Status NetworkStatus      `json:"status,omitempty"`
}

// ClusterNetworkList is a list of ClusterNetworks.
//
// +kubebuilder:object:root=true
type ClusterNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterNetwork `json:"items"`
}

// Readiness reports whether SDN has written the network's Ready condition at all (answered:
// True or False; a network without one is new to SDN) and whether it is True (ready).
func (s *NetworkStatus) Readiness() (answered, ready bool) {
	c := meta.FindStatusCondition(s.Conditions, ConditionReady)
	return c != nil, c != nil && c.Status == metav1.ConditionTrue
}
