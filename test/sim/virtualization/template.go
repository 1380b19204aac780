package virtualization

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
)

// KVVMKind is the KubeVirt VirtualMachine of Deckhouse's fork, whose group is renamed to
// internal.virtualization.deckhouse.io (VC facts §1); the stand-in's CRD of it is in
// test/crds/standin.
var KVVMKind = schema.GroupVersionKind{Group: "internal.virtualization.deckhouse.io", Version: "v1",
	Kind: "InternalVirtualizationVirtualMachine"}

// AnnotationTapProvision is the template annotation VC sets beside networks-spec while the VM
// has additional interfaces (VC facts §1).
const AnnotationTapProvision = "network.deckhouse.io/tap-provision-by-dvp-supported"

// bindingPlugin is the network binding of every additional guest NIC (VC facts §1).
const bindingPlugin = "bpfbridge"

// template is the KVVM's launcher pod template as the stand-in reads and writes it: the
// networks-spec a new launcher pod gets, whether it was made from a record
// (consumer.AnnotationDecided), and the KVVM itself (nil when it does not exist yet).
type template struct {
	kvvm    *unstructured.Unstructured
	entries []sdnv1.NetworksSpecEntry
	decided bool
}

// readTemplate reads the KVVM of the VM key (of UID uid); a missing one, or one an earlier VM
// of the same name left, is an empty template.
func (s *Simulator) readTemplate(ctx context.Context, key types.NamespacedName, uid types.UID) (*template, error) {
	kvvm := newUnstructured(KVVMKind)
	switch err := s.get(ctx, key, kvvm); {
	case apierrors.IsNotFound(err):
		return &template{}, nil
	case err != nil:
		return nil, fmt.Errorf("getting KVVM %s: %w", key, err)
	}
	t := &template{kvvm: kvvm}
	if ref := metav1.GetControllerOf(kvvm); ref == nil || ref.UID != uid {
		return t, nil
	}
	annotations, _, _ := unstructured.NestedStringMap(kvvm.Object, "spec", "template", "metadata", "annotations")
	t.entries, _ = sdnv1.ParseNetworksSpec(annotations[sdnv1.AnnotationNetworksSpec]) // unreadable: none
	_, t.decided = annotations[consumer.AnnotationDecided]
	return t, nil
}

// annotations are the template's annotations, which KubeVirt copies onto a pod it creates:
// networks-spec and the tap flag while the list is not empty (both removed when only Main is
// left), and AnnotationDecided once the template is made from a record.
func (t *template) annotations() map[string]string {
	out := map[string]string{}
	if len(t.entries) > 0 {
		out[sdnv1.AnnotationNetworksSpec] = networksSpecValue(t.entries)
		out[AnnotationTapProvision] = "true"
	}
	if t.decided {
		out[consumer.AnnotationDecided] = "true"
	}
	return out
}

// writeTemplate makes the KVVM's template follow res: while the VM runs, what runs (res.Live),
// so that a migration target carries what the source carries and a change held until restart
// stays out; when it does not run, what its next start gets (res.NextBoot). It creates the
// KVVM, controlled by the VM, when there is none.
func (s *Simulator) writeTemplate(ctx context.Context, st *vmState, res consumer.Result) error {
	want := &template{kvvm: st.template.kvvm, entries: res.NextBoot, decided: res.Decided}
	if len(st.pods) > 0 {
		want.entries = res.Live
	}
	if st.template.ownedBy(st.vm) && st.template.holds(want.entries, want.decided) {
		return nil
	}
	kvvm := want.kvvm
	if kvvm == nil {
		kvvm = &unstructured.Unstructured{}
		kvvm.SetGroupVersionKind(KVVMKind)
		kvvm.SetNamespace(st.vm.Namespace)
		kvvm.SetName(st.vm.Name)
		kvvm.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(st.vm, vmKind)})
	} else {
		kvvm = kvvm.DeepCopy()
		kvvm.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(st.vm, vmKind)})
	}
	if err := setTemplate(kvvm, want, st.vm); err != nil {
		return err
	}
	var err error
	if st.template.kvvm == nil {
		err = s.Client.Create(ctx, kvvm)
	} else {
		err = s.Client.Update(ctx, kvvm)
	}
	if err != nil {
		return fmt.Errorf("writing KVVM %s: %w", klog.KObj(kvvm), err)
	}
	s.wrote(kvvm)
	want.kvvm = kvvm
	st.template = want
	return nil
}

// ownedBy reports whether t's KVVM exists and vm controls it.
func (t *template) ownedBy(vm *virtv1.VirtualMachine) bool {
	return t.kvvm != nil && metav1.IsControlledBy(t.kvvm, vm)
}

// holds reports whether t carries entries (the same networks-spec) and the decided mark
// decided.
func (t *template) holds(entries []sdnv1.NetworksSpecEntry, decided bool) bool {
	return networksSpecValue(entries) == networksSpecValue(t.entries) && decided == t.decided
}

// setTemplate writes t into kvvm: the template's annotations and its guest NICs, one per
// additional interface of t (VC facts §1: pod network, binding bpfbridge, acpiIndex = the
// interface id, the MAC).
func setTemplate(kvvm *unstructured.Unstructured, t *template, vm *virtv1.VirtualMachine) error {
	annotations := map[string]any{}
	for k, v := range t.annotations() {
		annotations[k] = v
	}
	if err := unstructured.SetNestedMap(kvvm.Object, annotations, "spec", "template", "metadata", "annotations"); err != nil {
		return err
	}
	nics := []any{}
	nth := map[nicKey]int{}
	for _, e := range t.entries {
		k := nicKey{Type: virtv1.NetworkType(e.Type), Name: e.Name}
		nic := map[string]any{"name": e.IfName, "macAddress": macOf(vm, k, nth[k]), "binding": map[string]any{"name": bindingPlugin}}
		if e.ID != 0 {
			nic["acpiIndex"] = e.ID
		}
		nth[k]++
		nics = append(nics, nic)
	}
	return unstructured.SetNestedSlice(kvvm.Object, nics, "spec", "template", "spec", "domain", "devices", "interfaces")
}

// networksSpecValue is the networks-spec annotation of entries, as VC writes it: a JSON list
// with the keys in VC's order (sdnv1.NetworksSpecEntry's field order); "" for no entries.
func networksSpecValue(entries []sdnv1.NetworksSpecEntry) string {
	if len(entries) == 0 {
		return ""
	}
	data, _ := json.Marshal(entries) // plain structs of strings and ints: cannot fail
	return string(data)
}

// deleteTemplate deletes the deleted VM key's KVVM.
func (s *Simulator) deleteTemplate(ctx context.Context, key types.NamespacedName) error {
	kvvm := &unstructured.Unstructured{}
	kvvm.SetGroupVersionKind(KVVMKind)
	kvvm.SetNamespace(key.Namespace)
	kvvm.SetName(key.Name)
	if err := client.IgnoreNotFound(s.Client.Delete(ctx, kvvm)); err != nil {
		return fmt.Errorf("deleting KVVM %s: %w", key, err)
	}
	return nil
}
