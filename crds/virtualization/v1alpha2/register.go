package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is virtualization.deckhouse.io/v1alpha2.
var GroupVersion = schema.GroupVersion{Group: "virtualization.deckhouse.io", Version: "v1alpha2"}

var (
	// SchemeBuilder registers VirtualMachine and VirtualMachineOperation with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds to a scheme; it fails only on a duplicate registration.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&VirtualMachine{}, &VirtualMachineList{},
		&VirtualMachineOperation{}, &VirtualMachineOperationList{})
}
