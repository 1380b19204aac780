package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is network.deckhouse.io/v1alpha1, the SDN module's API version.
var GroupVersion = schema.GroupVersion{Group: "network.deckhouse.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the SDN kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the SDN kinds to a scheme; it fails only on a duplicate registration.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Network{}, &NetworkList{}, &ClusterNetwork{}, &ClusterNetworkList{},
		&IPAddressPool{}, &IPAddressPoolList{}, &ClusterIPAddressPool{}, &ClusterIPAddressPoolList{},
		&IPAddress{}, &IPAddressList{}, &IPAddressLease{}, &IPAddressLeaseList{})
}
