package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Kinds of address pools, as NetworkIPAM.IPAddressPoolRef.Kind spells them.
const (
	KindIPAddressPool        = "IPAddressPool"
	KindClusterIPAddressPool = "ClusterIPAddressPool"
)

// IPAddressPoolSpec is the address space of a pool.
type IPAddressPoolSpec struct {
	// LeaseTTL is how long a released address stays reserved (by its orphaned IPAddressLease)
	// before SDN hands it out again, to any IPAddress.
	// +optional
	LeaseTTL *metav1.Duration `json:"leaseTTL,omitempty"`
	// Pools are the subnets addresses come from.
	// +kubebuilder:validation:MinItems=1
	Pools []Subnet `json:"pools"`
}

// Subnet is one CIDR of a pool, optionally restricted to ranges.
type Subnet struct {
	// Network is the subnet in CIDR notation, e.g. 10.10.0.0/24.
	Network string `json:"network"`
	// Ranges restrict allocation to inclusive "a.b.c.d-a.b.c.e" ranges inside Network; when
	// empty, the whole of Network is allocatable except its network and broadcast addresses
	// (a /31 gives both of its addresses, a /32 its one address, as in RFC 3021). No address
	// is withheld as a gateway: a gateway inside Network must be left out of the ranges.
	// +optional
	Ranges []string `json:"ranges,omitempty"`
	// Routes are handed to the guest by DHCP.
	// +optional
	Routes []Route `json:"routes,omitempty"`
}

// Route is a static route served by DHCP (pools[].routes, IPAddress status.routes).
type Route struct {
	Destination string `json:"destination"`
	Via         string `json:"via"`
}

// IPAddressPool is a namespaced address pool, used by Networks of its namespace.
//
// +kubebuilder:object:root=true
type IPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAddressPoolSpec `json:"spec"`
}

// IPAddressPoolList is a list of IPAddressPools.
//
// +kubebuilder:object:root=true
type IPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressPool `json:"items"`
}

// ClusterIPAddressPool is a cluster-scoped address pool, used by ClusterNetworks.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
type ClusterIPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPAddressPoolSpec `json:"spec"`
}

// ClusterIPAddressPoolList is a list of ClusterIPAddressPools.
//
// +kubebuilder:object:root=true
type ClusterIPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterIPAddressPool `json:"items"`
}
