package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindIPAddressLease is the kind of SDN's address leases.
const KindIPAddressLease = "IPAddressLease"

// IPAddressLeaseSpec is the address a lease reserves and for how long it outlives its IPAddress.
type IPAddressLeaseSpec struct {
	// IP is the reserved address.
	IP string `json:"ip"`
	// TTL is how long the lease keeps the address once orphaned (the pool's leaseTTL).
	// +optional
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// IPAddressLeaseStatus says whether the lease's IPAddress is gone.
type IPAddressLeaseStatus struct {
	// OrphaningTimestamp is when the lease's IPAddress was deleted; the address stays
	// reserved until OrphaningTimestamp + spec.ttl, for any IPAddress.
	// +optional
	OrphaningTimestamp *metav1.Time `json:"orphaningTimestamp,omitempty"`
}

// IPAddressLease (cluster-scoped) reserves one allocated address. SDN keeps one per allocated
// address; when the IPAddress holding it is deleted, the lease is orphaned and keeps the address
// from every new request — Static or Auto, under any name — for spec.ttl. Leases are objects,
// so they survive a restart of SDN. How SDN links a lease to its IPAddress is not documented.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.spec.ip`
// +kubebuilder:printcolumn:name="TTL",type=string,JSONPath=`.spec.ttl`
// +kubebuilder:printcolumn:name="Orphaned",type=date,JSONPath=`.status.orphaningTimestamp`
type IPAddressLease struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressLeaseSpec   `json:"spec"`
	Status IPAddressLeaseStatus `json:"status,omitempty"`
}

// IPAddressLeaseList is a list of IPAddressLeases.
//
// +kubebuilder:object:root=true
type IPAddressLeaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressLease `json:"items"`
}
