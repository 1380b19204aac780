package plan

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Bounds of what the record's CRD accepts per interface.
const (
	maxRecordReason  = 64
	maxRecordMessage = 1024
)

// record returns the VM's decision record as this reconcile decides it, and whether it differs
// from the observed one and is to be written. Release bookkeeping that is over (an IPAddress
// deleted, a handoff past its grace) is dropped only when the record is written anyway:
// dropping it alone would be a write nobody reads.
func record(s *scope) (*v1alpha1.VirtualMachineIPAM, bool) {
	applied := appliedEntries(s)
	spec := v1alpha1.VirtualMachineIPAMSpec{VMUID: s.vm.UID, VMGeneration: s.vm.Generation}
	for _, it := range s.interfaces {
		spec.Interfaces = append(spec.Interfaces, decisionOf(s, it, applied))
	}
	for _, it := range s.removed {
		if d, held := heldRemoval(s, it, applied); held {
			spec.Interfaces = append(spec.Interfaces, d)
		}
	}
	spec.Releases = releases(s, &spec)
	spec.Summary = summarize(spec.Interfaces)
	rec := &v1alpha1.VirtualMachineIPAM{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "VirtualMachineIPAM"},
		ObjectMeta: metav1.ObjectMeta{Name: s.vm.Name, Namespace: s.vm.Namespace},
		Spec:       spec,
	}
	prev := s.record
	if prev == nil {
		rec.OwnerReferences = []metav1.OwnerReference{VMOwnerRef(s.vm)}
		return rec, true
	}
	prev.ObjectMeta.DeepCopyInto(&rec.ObjectMeta)
	rec.TypeMeta, rec.Status = prev.TypeMeta, *prev.Status.DeepCopy()
	rec.OwnerReferences = ownedByVM(prev.OwnerReferences, s)
	if !equality.Semantic.DeepEqual(rec.OwnerReferences, prev.OwnerReferences) {
		return rec, true
	}
	if equality.Semantic.DeepEqual(rec.Spec, prev.Spec) {
		return prev, false
	}
	pruned := *prev.Spec.DeepCopy()
	pruned.Releases = slices.DeleteFunc(pruned.Releases, func(r v1alpha1.Release) bool { return !slices.Contains(rec.Spec.Releases, r) })
	if equality.Semantic.DeepEqual(rec.Spec, pruned) {
		return prev, false // only finished bookkeeping differs
	}
	return rec, true
}

// ownedByVM is refs with the VM's controller reference in place of any other VirtualMachine
// controller reference (a record left by an earlier VM of the same name).
func ownedByVM(refs []metav1.OwnerReference, s *scope) []metav1.OwnerReference {
	out := []metav1.OwnerReference{VMOwnerRef(s.vm)}
	for _, r := range refs {
		if r.Controller == nil || !*r.Controller {
			out = append(out, r)
		}
	}
	return out
}

// decisionOf is the record's entry for an interface of the spec. It attaches the interface
// when the decision does; an interface that has a transient problem (keepsApplied) keeps what is
// applied — the running pod's entry, or for a stopped VM what the record attached — and
// reports the problem. It sets it.attached.
func decisionOf(s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry) v1alpha1.InterfaceDecision {
	d := v1alpha1.InterfaceDecision{ID: it.spec.ID, Type: v1alpha1.NetworkKind(it.spec.Type), Name: it.spec.Name,
		Allocation: allocationOf(it.decision.Allocation), Hotplug: it.decision.Hotplug, DecidedBy: provenance(it.decision)}
	if it.problem != nil {
		d.Reason = consumer.Truncate(it.problem.reason, maxRecordReason)
		d.Message = consumer.Truncate(evaluator.SafeMessage(it.problem.message), maxRecordMessage)
	}
	want := attachedEntry(it)
	kept, had := applied[it.key]
	switch {
	case want != nil:
		d.Attach, d.IPAddressName = true, first(want.IPAddressNames)
		it.attached = want
	case it.dupOf < 0 && had && keepsApplied(it):
		st := appliedState(kept, it.autoName)
		d.Attach, d.Allocation, d.IPAddressName = true, v1alpha1.Allocation(st.Allocation), first(kept.IPAddressNames)
		it.attached = &kept
	default:
		d.IPAddressName = wouldUse(it)
	}
	if d.Attach {
		d.Address = addressOf(s.ipAddresses[d.IPAddressName])
	}
	return d
}

// heldRemoval is the record's entry for an interface the running pod carries and the spec no
// longer names, when its removal may not be hot-unplugged: it stays attached, with the address
// it carries, until the next start. A removal hotplug allows is left out of the record, which
// is what unplugs it.
func heldRemoval(s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry) (v1alpha1.InterfaceDecision, bool) {
	kept, had := applied[it.key]
	if !had || it.decision.Hotplug {
		return v1alpha1.InterfaceDecision{}, false
	}
	st := appliedState(kept, it.autoName)
	d := v1alpha1.InterfaceDecision{ID: ptrIf(kept.ID), Type: v1alpha1.NetworkKind(kept.Type), Name: kept.Name,
		Allocation: v1alpha1.Allocation(st.Allocation), Attach: true, Removed: true, IPAddressName: first(kept.IPAddressNames),
		DecidedBy: provenance(it.decision)}
	d.Address = addressOf(s.ipAddresses[d.IPAddressName])
	it.attached = &kept
	return d, true
}

// first is names' first element, "" when it has none.
func first(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// ptrIf is a pointer to id, nil for 0 (no id).
func ptrIf(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// wouldUse is the IPAddress a not attached interface would carry: its static one, or its Auto
// one when it holds one (holdsAddress); "" otherwise.
func wouldUse(it *iface) string {
	switch {
	case it.spec.IPAddressName != "":
		return it.spec.IPAddressName
	case holdsAddress(it):
		return it.autoName
	}
	return ""
}

// allocationOf is a decided allocation as the record spells it; "" when none was decided.
func allocationOf(a evaluator.Allocation) v1alpha1.Allocation {
	switch a {
	case evaluator.AllocationAuto, evaluator.AllocationStatic, evaluator.AllocationNone:
		return v1alpha1.Allocation(a)
	}
	return ""
}

// provenance is a decision's provenance as the record keeps it, nil when nothing decided.
func provenance(d evaluator.Decision) *v1alpha1.Provenance {
	p := &v1alpha1.Provenance{Allocation: d.Provenance.Allocation, Hotplug: d.Provenance.Hotplug}
	if d.Skip && d.Provenance.Skip != "" {
		p.Skip = d.Provenance.Skip
		if d.Rule != "" {
			p.Skip += "/" + d.Rule
		}
	}
	if *p == (v1alpha1.Provenance{}) {
		return nil
	}
	return p
}

// summarize is the record's summary of its decisions.
func summarize(ds []v1alpha1.InterfaceDecision) v1alpha1.RecordSummary {
	attached, total, reason := 0, 0, ""
	for _, d := range ds {
		if d.Removed {
			continue
		}
		total++
		if d.Attach {
			attached++
		}
		if reason == "" {
			reason = d.Reason
		}
	}
	return v1alpha1.RecordSummary{Attached: fmt.Sprintf("%d/%d", attached, total), Reason: reason}
}

// attachedEntry is the networks-spec entry (IPAM fields only) of an interface the decision
// attaches, or nil.
func attachedEntry(it *iface) *sdnv1.NetworksSpecEntry {
	if it.problem != nil || it.decision.Skip || it.dupOf >= 0 {
		return nil
	}
	e := &sdnv1.NetworksSpecEntry{ID: deref(it.spec.ID), Type: string(it.spec.Type), Name: it.spec.Name}
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

// transientReasons are problems that pass on their own (SDN catching up, a network flapping, a
// pool that fills and drains) or that say nothing about the interface (a policy that failed to
// evaluate). They do not unplug an interface that is applied — yanking a NIC out of a running
// guest for them would hurt more than it helps — and an interface decided Auto keeps or gets
// its IPAddress through them (holdsAddress). Every other problem unplugs and holds no address.
var transientReasons = map[string]bool{
	string(evaluator.ReasonNetworkNotReady): true, string(evaluator.ReasonIPAddressPending): true,
	string(evaluator.ReasonIPAddressNotAllocated): true, string(evaluator.ReasonPoolExhausted): true,
	string(evaluator.ReasonPolicyError): true,
}

// keepsApplied: the interface keeps what is applied through its problem.
func keepsApplied(it *iface) bool {
	return it.decision.Allocation == evaluator.AllocationUnknown || it.problem != nil && transientReasons[it.problem.reason]
}

// attachedNames are the IPAddress names the record's decisions attach.
func attachedNames(spec *v1alpha1.VirtualMachineIPAMSpec) map[string]bool {
	out := map[string]bool{}
	for _, d := range spec.Interfaces {
		if d.Attach && d.IPAddressName != "" {
			out[d.IPAddressName] = true
		}
	}
	return out
}

// keyOf is a decision's network key ("<Type>/<name>").
func keyOf(d *v1alpha1.InterfaceDecision) string { return index.NetworkKey(string(d.Type), d.Name) }
