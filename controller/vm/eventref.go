package vm

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// The API versions of the objects events name, computed once. client-go's recorder builds
// an event's regarding and related references with reference.GetReference, which joins group
// and version into a new string on every call; its broadcaster then keeps a copy of every
// event for 6–12 minutes (the series cache of tools/events, which nothing configures), so two
// such strings per event stayed on the heap with it — 4,000 events at 2,000 VMs. Handing the
// recorder the references ready-made (GetReference returns an *ObjectReference as it is)
// keeps one copy of each for all events.
var (
	vmAPIVersion        = vmv1.GroupVersion.String()
	ipAddressAPIVersion = sdnv1.GroupVersion.String()
)

// eventReference returns the reference of obj that the recorder would build, as an
// *ObjectReference whose API version and kind are shared strings; obj itself when it is of
// another kind, and nil when obj is nil.
func eventReference(obj runtime.Object) runtime.Object {
	switch o := obj.(type) {
	case *vmv1.VirtualMachine:
		if o == nil {
			return nil
		}
		return &corev1.ObjectReference{Kind: "VirtualMachine", APIVersion: vmAPIVersion, Namespace: o.Namespace,
			Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}
	case *sdnv1.IPAddress:
		if o == nil {
			return nil
		}
		return &corev1.ObjectReference{Kind: "IPAddress", APIVersion: ipAddressAPIVersion, Namespace: o.Namespace,
			Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}
	}
	return obj
}
