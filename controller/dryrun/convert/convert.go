package convert

import (
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
)

// Status presents p, the plan of one reconcile of vm, as an Evaluation's status: vm is the VM
// as evaluated (merged with its live copy when exists), policies the policies that decided.
// The status shares nothing with p.
func Status(vm *vmv1.VirtualMachine, exists bool, policies dryrunv1.PolicySummary, p *plan.Plan) *dryrunv1.EvaluationStatus {
	policies.Order = slices.Clone(policies.Order)
	st := &dryrunv1.EvaluationStatus{
		VM:         dryrunv1.VMSummary{Namespace: vm.Namespace, Name: vm.Name, UID: string(vm.UID), Exists: exists},
		Policies:   policies,
		Interfaces: mapSlice(p.Interfaces, interfaceResult),
		Actions: dryrunv1.Actions{CreateIPAddresses: mapSlice(p.CreateIPAddresses, (*sdnv1.IPAddress).DeepCopy),
			RecordChanged: p.RecordChanged, DeleteIPAddresses: slices.Clone(p.Releasing), Deferred: p.Deferred},
		Applied: applied(vm, p),
	}
	if p.Record != nil {
		st.Actions.Record = p.Record.Spec.DeepCopy()
	}
	return st
}

// interfaceResult is the API's view of one interface's result.
func interfaceResult(r plan.InterfaceResult) dryrunv1.InterfaceResult {
	return dryrunv1.InterfaceResult{Index: r.Index, Removed: r.Removed, Type: r.Type, Name: r.Name,
		IPAddressName: r.IPAddressName, Address: r.Address, Attached: r.Attached, Decision: Decision(r.Decision),
		Reason: r.Reason, Message: r.Message}
}

// Decision is the API's view of an evaluator's Decision, its trace and input included.
func Decision(d evaluator.Decision) dryrunv1.Decision {
	return dryrunv1.Decision{Allocation: string(d.Allocation), Skip: d.Skip, Reason: string(d.Reason),
		Message: d.Message, Hotplug: d.Hotplug, Policy: d.Policy, Rule: d.Rule, Provenance: provenance(d.Provenance),
		Cost: d.Cost, Trace: trace(d.Trace), DeadlineExceeded: d.DeadlineExceeded}
}

func provenance(p evaluator.Provenance) dryrunv1.Provenance {
	return dryrunv1.Provenance{Allocation: p.Allocation, Skip: p.Skip, Hotplug: p.Hotplug}
}

func trace(t evaluator.Trace) dryrunv1.Trace {
	out := dryrunv1.Trace{Matched: slices.Clone(t.Matched), Ignored: slices.Clone(t.Ignored), Passed: slices.Clone(t.Passed),
		Replaced: mapSlice(t.Replaced, replacement), Audit: mapSlice(t.Audit, auditRecord), Errors: slices.Clone(t.Errors),
		Failures: mapSlice(t.Failures, policyFailure), Input: Input(t.Input)}
	if t.Variables != nil {
		out.Variables = make(map[string]map[string]string, len(t.Variables))
		for policy, values := range t.Variables {
			out.Variables[policy] = maps.Clone(values)
		}
	}
	return out
}

func replacement(r evaluator.Replacement) dryrunv1.Replacement {
	return dryrunv1.Replacement{Rule: r.Rule, Policy: r.Policy, By: r.By}
}

func policyFailure(f evaluator.PolicyFailure) dryrunv1.PolicyFailure {
	return dryrunv1.PolicyFailure{Policy: f.Policy, Mode: f.Mode, FailurePolicy: f.FailurePolicy, Field: f.Field, Error: f.Error}
}

func auditRecord(a evaluator.AuditRecord) dryrunv1.AuditRecord {
	return dryrunv1.AuditRecord{Policy: a.Policy, Allocation: string(a.Allocation), Skip: a.Skip, Reason: string(a.Reason),
		Message: a.Message, Hotplug: a.Hotplug, Rule: a.Rule, Provenance: provenance(a.Provenance), Error: a.Error,
		Differs: a.Differs}
}

// Input is the API's view of the evaluator's Input (nil for nil): the CEL variables a
// decision was made from.
func Input(in *evaluator.Input) *dryrunv1.Input {
	if in == nil {
		return nil
	}
	vm, it, n, ip := &in.VM, &in.Interface, &in.Network, &in.IPAddress
	return &dryrunv1.Input{
		VM: dryrunv1.InputVM{Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, Labels: maps.Clone(vm.Labels),
			Annotations: maps.Clone(vm.Annotations), Phase: vm.Phase, CreationTimestamp: timestamp(vm.CreationTimestamp)},
		Interface: dryrunv1.InputInterface{Index: it.Index, ID: it.ID, Type: it.Type, Name: it.Name,
			IPAddressName: it.IPAddressName, MACAddress: it.MACAddress, Spec: dryrunv1.InputInterfaceSpec{ID: it.Spec.ID,
				Type: it.Spec.Type, Name: it.Spec.Name, VirtualMachineMACAddressName: it.Spec.VirtualMachineMACAddressName,
				IPAddressName: it.Spec.IPAddressName}},
		Network: dryrunv1.InputNetwork{Exists: n.Exists, Type: n.Type, Ready: n.Ready, IPAMEnabled: n.IPAMEnabled,
			Pool: ref(n.Pool), Labels: maps.Clone(n.Labels)},
		IPAddress: dryrunv1.InputIPAddress{Exists: ip.Exists, Name: ip.Name, Type: ip.Type, NetworkRef: ref(ip.NetworkRef),
			Phase: ip.Phase, Address: ip.Address, Allocated: ip.Allocated, Reason: ip.Reason,
			Owner: dryrunv1.InputOwner{Name: ip.Owner.Name, UID: ip.Owner.UID}},
		Holders:   dryrunv1.InputHolders{VMs: slices.Clone(in.Holders.VMs), Holder: in.Holders.Holder},
		Namespace: dryrunv1.InputNamespace{Name: in.Namespace.Name, Labels: maps.Clone(in.Namespace.Labels)},
		Change: dryrunv1.InputChange{Kind: in.Change.Kind, From: changeState(in.Change.From), To: changeState(in.Change.To),
			VMRunning: in.Change.VMRunning},
	}
}

func ref(r evaluator.Ref) dryrunv1.InputRef { return dryrunv1.InputRef{Kind: r.Kind, Name: r.Name} }

func changeState(s evaluator.ChangeState) dryrunv1.InputChangeState {
	return dryrunv1.InputChangeState{Allocation: s.Allocation, IPAddressName: s.IPAddressName}
}

// timestamp is t as the API serves it: RFC 3339 with the fractional seconds t has, as
// encoding/json writes a time.Time.
func timestamp(t time.Time) string { return t.Format(time.RFC3339Nano) }

// applied is what vm would look like once p's record is applied: its networks-spec, its
// status.networks with the address each attached interface carries (what SDN configures), and
// the conditions a virtualization controller builds from the record (policies/consumer).
func applied(vm *vmv1.VirtualMachine, p *plan.Plan) dryrunv1.AppliedVM {
	a := p.Applied
	out := dryrunv1.AppliedVM{NextBoot: cloneEntries(a.NextBoot), Running: cloneEntries(a.Live),
		HeldUntilRestart: slices.Clone(a.Held)}
	if out.NextBoot == nil {
		out.NextBoot = []sdnv1.NetworksSpecEntry{}
	}
	addresses := map[int]string{}
	for _, it := range p.Interfaces {
		if it.Attached && !it.Removed {
			addresses[it.Index] = it.Address
		}
	}
	nth := map[string]int{}
	for i, n := range vm.Spec.Networks {
		entry := vmv1.NetworksStatus{ID: n.ID, Type: n.Type, Name: n.Name, VirtualMachineMACAddressName: n.VirtualMachineMACAddressName}
		if prev := nthStatus(vm.Status.Networks, n.Type, n.Name, nth[string(n.Type)+"/"+n.Name]); prev != nil {
			entry.MACAddress = prev.MACAddress
		}
		nth[string(n.Type)+"/"+n.Name]++
		entry.IPAddress = addresses[i]
		out.Networks = append(out.Networks, entry)
	}
	total := 0
	for _, it := range p.Interfaces {
		if !it.Removed {
			total++
		}
	}
	out.Conditions = []metav1.Condition{consumer.NetworkReady(a.Items, total, vm.Generation)}
	if c := consumer.AwaitingRestart(a.Held, vm.Generation); c != nil {
		out.Conditions = append(out.Conditions, *c)
	}
	return out
}

// nthStatus returns the nth (from 0) entry of list for (typ, name), or nil.
func nthStatus(list []vmv1.NetworksStatus, typ vmv1.NetworkType, name string, nth int) *vmv1.NetworksStatus {
	for i := range list {
		if list[i].Type == typ && list[i].Name == name {
			if nth == 0 {
				return &list[i]
			}
			nth--
		}
	}
	return nil
}

func cloneEntries(in []sdnv1.NetworksSpecEntry) []sdnv1.NetworksSpecEntry {
	return mapSlice(in, func(e sdnv1.NetworksSpecEntry) sdnv1.NetworksSpecEntry { return *e.DeepCopy() })
}

// mapSlice is f of every element of in; nil for nil, so that a list the internals leave null
// is served null (and an empty one empty).
func mapSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
