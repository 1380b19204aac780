package vm

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
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

// act makes the world match the decisions: Auto IPAddresses, then networks-spec.
func (r *Reconciler) act(ctx context.Context, s *scope) error {
	for _, it := range s.interfaces {
		if it.dupOf < 0 && it.decision.Allocation == evaluator.AllocationAuto {
			if err := r.ensureAutoIPAddress(ctx, s, it); err != nil {
				return err
			}
		}
	}
	if err := r.deleteUnwanted(ctx, s); err != nil {
		return err
	}
	return r.writeNetworksSpec(ctx, s)
}

// ensureAutoIPAddress creates the interface's Auto IPAddress under its deterministic name.
// Create is the lock: AlreadyExists means a stale cache or another replica won the race, and
// the live object is checked for its owner instead of being adopted.
func (r *Reconciler) ensureAutoIPAddress(ctx context.Context, s *scope, it *iface) error {
	if it.auto != nil {
		r.checkOwner(s, it)
		return nil
	}
	ip := &sdnv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: it.autoName, Namespace: s.vm.Namespace,
			Labels:          map[string]string{LabelVMUID: string(s.vm.UID)},
			Annotations:     map[string]string{AnnotationInterface: it.key},
			OwnerReferences: []metav1.OwnerReference{vmOwnerRef(s.vm)},
		},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto,
			NetworkRef: sdnv1.IPAddressNetworkRef{Kind: string(it.spec.Type), Name: it.spec.Name}},
	}
	err := r.Client.Create(ctx, ip)
	switch {
	case err == nil:
		it.auto = ip
		r.event(s.vm, corev1.EventTypeNormal, "IPAddressCreated", "Create",
			"Created IPAddress %s for %s", ip.Name, it.key)
		return nil
	case apierrors.IsAlreadyExists(err):
		live := &sdnv1.IPAddress{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ip), live); err != nil {
			return fmt.Errorf("get IPAddress %s after AlreadyExists: %w", ip.Name, err)
		}
		it.auto = live
		r.checkOwner(s, it)
		return nil
	default:
		return fmt.Errorf("create IPAddress %s: %w", ip.Name, err)
	}
}

// checkOwner reports an object holding the Auto name that this VM does not control.
func (r *Reconciler) checkOwner(s *scope, it *iface) {
	if ref := index.ControllerVM(it.auto); ref != nil && ref.UID == s.vm.UID {
		return
	}
	owner := "no VirtualMachine"
	if ref := index.ControllerVM(it.auto); ref != nil {
		owner = fmt.Sprintf("VirtualMachine %s (uid %s)", ref.Name, ref.UID)
	}
	it.problem = &problem{ReasonIPAddressConflict, fmt.Sprintf(
		"IPAddress %s already exists and is controlled by %s; vmipam does not adopt it", it.autoName, owner)}
}

func vmOwnerRef(vm *vmv1.VirtualMachine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
		Name: vm.Name, UID: vm.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// deleteUnwanted deletes this VM's Auto IPAddresses that no interface wants any more. An
// interface whose decision failed (allocation unknown) keeps its IPAddress. Only objects
// controlled by this VM's UID and of type Auto are candidates, whatever their labels say.
func (r *Reconciler) deleteUnwanted(ctx context.Context, s *scope) error {
	wanted := map[string]bool{}
	for _, it := range s.interfaces {
		switch it.decision.Allocation {
		case evaluator.AllocationAuto, evaluator.AllocationUnknown:
			wanted[it.autoName] = true
		}
	}
	for i := range s.owned {
		ip := &s.owned[i]
		ref := index.ControllerVM(ip)
		if wanted[ip.Name] || ref == nil || ref.UID != s.vm.UID || ip.Spec.Type != sdnv1.IPAddressTypeAuto ||
			ip.DeletionTimestamp != nil {
			continue
		}
		err := r.Client.Delete(ctx, ip, client.Preconditions{UID: &ip.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete IPAddress %s: %w", ip.Name, err)
		}
		if err == nil {
			r.event(s.vm, corev1.EventTypeNormal, "IPAddressDeleted", "Delete",
				"Deleted IPAddress %s: no interface uses it any more", ip.Name)
		}
	}
	return nil
}

// attachedEntry is the networks-spec entry of an interface that is attached, or nil.
func attachedEntry(it *iface) *sdnv1.NetworksSpecEntry {
	if it.problem != nil || it.decision.Skip || it.dupOf >= 0 {
		return nil
	}
	e := &sdnv1.NetworksSpecEntry{ID: deref(it.spec.ID), Type: string(it.spec.Type), Name: it.spec.Name,
		IfName: naming.IfName(string(it.spec.Type), it.spec.Name)}
	switch it.decision.Allocation {
	case evaluator.AllocationAuto:
		e.IPAssignmentMode, e.IPAddressNames = sdnv1.IPAssignmentModeDHCP, []string{it.autoName}
	case evaluator.AllocationStatic:
		e.IPAssignmentMode, e.IPAddressNames = sdnv1.IPAssignmentModeDHCP, []string{it.spec.IPAddressName}
	case evaluator.AllocationNone:
	default:
		return nil
	}
	return e
}

// writeNetworksSpec writes the desired networks-spec on the VM (for the next launcher pod) and,
// interface by interface as hotplug allows, on every running launcher pod.
func (r *Reconciler) writeNetworksSpec(ctx context.Context, s *scope) error {
	var desired []sdnv1.NetworksSpecEntry
	for _, it := range s.interfaces {
		if e := attachedEntry(it); e != nil {
			desired = append(desired, *e)
		}
	}
	if err := r.patchNetworksSpec(ctx, s.vm, desired); err != nil {
		return fmt.Errorf("VirtualMachine: %w", err)
	}
	s.pending = nil
	for i := range s.pods {
		entries, pending := podEntries(s, parseNetworksSpec(s.pods[i].Annotations[sdnv1.AnnotationNetworksSpec]))
		s.pending = mergePending(s.pending, pending)
		if err := r.patchNetworksSpec(ctx, &s.pods[i], entries); err != nil {
			return fmt.Errorf("launcher pod %s: %w", s.pods[i].Name, err)
		}
	}
	return nil
}

// podEntries is the networks-spec for a running pod: per interface the desired entry when it
// equals what the pod has or hotplug allows the change, else the pod's current entry (the
// interface is then pending a restart). Interfaces gone from the spec are unplugged.
func podEntries(s *scope, current []sdnv1.NetworksSpecEntry) ([]sdnv1.NetworksSpecEntry, []string) {
	have := map[string]sdnv1.NetworksSpecEntry{}
	for _, e := range current {
		have[index.NetworkKey(e.Type, e.Name)] = e
	}
	var out []sdnv1.NetworksSpecEntry
	var pending []string
	for _, it := range s.interfaces {
		if it.dupOf >= 0 {
			continue
		}
		want := attachedEntry(it)
		old, had := have[it.key]
		if entryEqual(want, old, had) || it.decision.Hotplug || it.decision.Allocation == evaluator.AllocationUnknown {
			if want != nil {
				out = append(out, *want)
			}
			continue
		}
		pending = append(pending, it.key)
		if had {
			out = append(out, old)
		}
	}
	return out, pending
}

func entryEqual(want *sdnv1.NetworksSpecEntry, old sdnv1.NetworksSpecEntry, had bool) bool {
	if want == nil || !had {
		return want == nil && !had
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(old)
	return string(a) == string(b)
}

func mergePending(a, b []string) []string {
	for _, k := range b {
		found := false
		for _, x := range a {
			found = found || x == k
		}
		if !found {
			a = append(a, k)
		}
	}
	return a
}

// patchNetworksSpec sets the annotation on obj (a VM or pod) when it differs. An object without
// the annotation and with nothing to attach is left alone.
func (r *Reconciler) patchNetworksSpec(ctx context.Context, obj client.Object, entries []sdnv1.NetworksSpecEntry) error {
	current, had := obj.GetAnnotations()[sdnv1.AnnotationNetworksSpec]
	if len(entries) == 0 && !had {
		return nil
	}
	if entries == nil {
		entries = []sdnv1.NetworksSpecEntry{}
	}
	data, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	if string(data) == current {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{sdnv1.AnnotationNetworksSpec: string(data)}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch %s: %w", sdnv1.AnnotationNetworksSpec, err)
	}
	return nil
}
