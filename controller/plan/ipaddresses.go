package plan

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// Labels, annotations and reasons on objects vmipam creates.
const (
	// LabelVMUID marks an Auto IPAddress with the UID of its VM (virtualization platform's
	// label). It is informational: ownership is decided by the controller ownerReference only.
	LabelVMUID = "virtualization.deckhouse.io/virtual-machine-uid"
	// AnnotationInterface records which interface ("<Type>/<network>") an Auto IPAddress
	// serves, since its name may be shortened with a hash.
	AnnotationInterface = "ipam.virtualization.deckhouse.io/interface"
	// ReasonIPAddressConflict: an object already has the interface's Auto IPAddress name but
	// is not controlled by this VM; vmipam never adopts it.
	ReasonIPAddressConflict = "IPAddressConflict"
)

// creates returns the Auto IPAddresses to create: one for every interface that holds an
// address (holdsAddress) whose deterministic name is free. An object of that name the VM does not control is a conflict
// (checkOwner). The namespace controller deletes a terminating namespace's IPAddresses before
// its VMs; creating them again would only be refused, so nothing is created there.
func creates(s *scope) []*sdnv1.IPAddress {
	creating := s.namespace == nil || s.namespace.DeletionTimestamp == nil
	var out []*sdnv1.IPAddress
	for _, it := range s.interfaces {
		if !holdsAddress(it) {
			continue
		}
		switch {
		case it.auto != nil:
			checkOwner(s, it)
		case creating:
			out = append(out, autoIPAddress(s.vm, it))
		}
	}
	return out
}

// holdsAddress says whether an interface holds an Auto IPAddress — vmipam creates it and
// keeps it — which is the one place that rule lives (docs/POLICIES.md, "Which interfaces hold
// an address"): an interface decided Auto that is attached, or skipped for a transient reason
// (transient: the network not ready yet, SDN still allocating, the pool full, a policy error),
// so that it is attached as soon as the problem passes. An interface a policy refuses (any
// other skip: a rule of the admin's, a static address missing, a duplicate) takes nothing from
// the pool; its Auto IPAddress, if it had one, is released (not while a running guest still
// carries it).
func holdsAddress(it *iface) bool {
	if it.dupOf >= 0 || it.decision.Allocation != evaluator.AllocationAuto {
		return false
	}
	return it.problem == nil || transientReasons[it.problem.reason]
}

// autoIPAddress is the Auto IPAddress of the interface as vmipam creates it.
func autoIPAddress(vm *vmv1.VirtualMachine, it *iface) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: sdnv1.GroupVersion.String(), Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{
			Name: it.autoName, Namespace: vm.Namespace,
			Labels:          map[string]string{LabelVMUID: string(vm.UID)},
			Annotations:     map[string]string{AnnotationInterface: it.key},
			OwnerReferences: []metav1.OwnerReference{VMOwnerRef(vm)},
		},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto,
			NetworkRef: sdnv1.IPAddressNetworkRef{Kind: string(it.spec.Type), Name: it.spec.Name}},
	}
}

// VMOwnerRef is the controller ownerReference of what vmipam creates for vm — its Auto
// IPAddresses and its record —, so that the garbage collector deletes them with it.
func VMOwnerRef(vm *vmv1.VirtualMachine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
		Name: vm.Name, UID: vm.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// checkOwner reports an object holding the Auto name that this VM does not control.
func checkOwner(s *scope, it *iface) {
	if ref := index.ControllerVM(it.auto); ref != nil && ref.UID == s.vm.UID {
		return
	}
	owner := "no VirtualMachine"
	if ref := index.ControllerVM(it.auto); ref != nil {
		// An ownerReference's name is not validated by the API: quote it like any other name.
		owner = fmt.Sprintf("VirtualMachine %s (uid %s)", evaluator.QuoteName(ref.Name), evaluator.QuoteName(string(ref.UID)))
	}
	it.problem = &problem{ReasonIPAddressConflict, fmt.Sprintf(
		"IPAddress %s already exists and is controlled by %s, and vmipam does not adopt it", it.autoName, owner)}
}

// Ours reports whether ip is an Auto IPAddress vmipam created for vm: of type Auto, controlled
// by vm's UID, with vmipam's interface annotation. Only such an IPAddress is ever deleted.
func Ours(ip *sdnv1.IPAddress, vm *vmv1.VirtualMachine) bool {
	ref := index.ControllerVM(ip)
	_, annotated := ip.Annotations[AnnotationInterface]
	return ref != nil && ref.UID == vm.UID && ip.Spec.Type == sdnv1.IPAddressTypeAuto && annotated
}
