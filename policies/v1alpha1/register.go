package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is ipam.virtualization.deckhouse.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "ipam.virtualization.deckhouse.io", Version: "v1alpha1"}

var (
	// SchemeBuilder registers ClusterIPAMPolicy and VirtualMachineIPAM with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds to a scheme; it fails only on a duplicate registration.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&ClusterIPAMPolicy{}, &ClusterIPAMPolicyList{}, &VirtualMachineIPAM{}, &VirtualMachineIPAMList{})
}
