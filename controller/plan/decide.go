package plan

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
)

// ReasonDuplicateInterface is the NetworkReady reason for a second spec.networks entry naming
// a network the VM already attaches; the first entry wins.
const ReasonDuplicateInterface = "DuplicateInterface"

// DefaultVMEvaluationBudget bounds the wall time of deciding every interface of one VM in one
// reconcile or dry run. Each interface's evaluation is bounded by the evaluator's deadline
// (1 s), but a VM with many interfaces could otherwise hold a reconcile worker for N times
// that. The interfaces not decided within the budget get a PolicyError naming it (their
// NetworkReady item says why; nothing existing is deleted for an unknown allocation) and the
// VM is retried with backoff; like any decision out of time, the reconciler publishes it only
// when the retry runs out of time too (Reconciler.firstDeadlineMiss). Real decisions take well under
// a millisecond each.
const DefaultVMEvaluationBudget = 2 * time.Second

// The cause of the budget context's end, which the evaluator names in the PolicyError of every
// interface left undecided: it says what the caller does next, so each caller has its own
// (a dry run saying "retried with backoff" would promise a retry nobody makes).
var (
	// errVMBudget: the reconciler requeues a VM over its budget with backoff (retry).
	errVMBudget = errors.New("the VM's evaluation budget was spent on the interfaces before this one, and it is retried with backoff")
	// errDryRunBudget: a dry run answers once and never retries.
	errDryRunBudget = errors.New("the VM's evaluation budget was spent on the interfaces before this one: " + DryRunBudgetNotice)
)

// DryRunBudgetNotice ends the decision message of every interface a dry run left undecided
// because the VM's evaluation budget ran out; the status the dry run shows carries the
// controller's text instead (what it would write), so front ends print this notice apart.
const DryRunBudgetNotice = "the dry run does not retry: this interface is left undecided (the controller would retry it with backoff)"

// decide asks the policy snapshot for one Decision per additional interface, all within the
// VM's evaluation budget (s.overBudget says when it ran out). When ctx ends first (a dry run's
// deadline, a shutdown) it stops and returns ctx's error: the decisions are then incomplete
// and must not be acted on or answered with. budgetCause is what the undecided interfaces'
// PolicyErrors say when the budget runs out: errVMBudget or errDryRunBudget.
func decide(ctx context.Context, s *scope, opts evaluator.Options, budgetCause error) error {
	evalCtx, cancel := context.WithTimeoutCause(ctx, cmp.Or(s.budget, DefaultVMEvaluationBudget), budgetCause)
	defer cancel()
	defer func() { s.overBudget = evalCtx.Err() != nil && ctx.Err() == nil }()
	applied := appliedEntries(s)
	for _, it := range s.interfaces {
		if ctx.Err() != nil { // nobody waits for the rest: stop spending CPU on it
			break
		}
		if it.dupOf >= 0 {
			it.decision = evaluator.Decision{Allocation: evaluator.AllocationUnknown, Skip: true}
			it.problem = &problem{ReasonDuplicateInterface,
				fmt.Sprintf("spec.networks[%d] repeats spec.networks[%d]", it.index, it.dupOf)}
			continue
		}
		it.decision = decideOutcome(evalCtx, s, it, applied, opts)
		if it.decision.Skip {
			it.problem = &problem{string(it.decision.Reason), it.decision.Message}
		}
	}
	decideRemoved(ctx, evalCtx, s, opts)
	if err := ctx.Err(); err != nil { // decisions made past the end are PolicyErrors, not answers
		return fmt.Errorf("deciding %d interfaces: %w", len(s.interfaces), err)
	}
	return nil
}

// decideWithin decides in unless the VM's budget (evalCtx) is already spent: the interface
// is then not evaluated and gets a PolicyError naming the budget right away.
func decideWithin(evalCtx context.Context, set *evaluator.Set, in evaluator.Input, opts evaluator.Options) evaluator.Decision {
	if evalCtx.Err() == nil {
		return set.Decide(evalCtx, in, opts)
	}
	msg := "not evaluated: " + context.Cause(evalCtx).Error()
	return evaluator.Decision{Allocation: evaluator.AllocationUnknown, Skip: true, Reason: evaluator.ReasonPolicyError,
		Message: msg, Trace: evaluator.Trace{Errors: []string{msg}}, DeadlineExceeded: true}
}

// outOfTime returns the keys of the interfaces (removed ones too) whose decision failed only
// because its wall-clock time ran out (evaluator.Decision.DeadlineExceeded: the evaluator's
// deadline, or the VM's budget), in order; nil when none did.
func outOfTime(s *scope) []string {
	var keys []string
	for _, its := range [][]*iface{s.interfaces, s.removed} {
		for _, it := range its {
			if it.decision.DeadlineExceeded {
				keys = append(keys, it.key)
			}
		}
	}
	return keys
}

// vmInput is what a policy sees of vm, the one place every front end (the controller, the
// dry run, ipamctl evaluate) builds it: its annotations without kubectl's
// last-applied-configuration, which the controller's cache drops (controller/reads) and a manifest
// given to the dry run or ipamctl keeps — before, a policy reading it decided differently
// offline and in the cluster. vm is not changed (it may be the cache's object).
func vmInput(vm *vmv1.VirtualMachine) evaluator.VM {
	annotations := vm.Annotations
	if _, ok := annotations[corev1.LastAppliedConfigAnnotation]; ok {
		annotations = maps.Clone(annotations)
		delete(annotations, corev1.LastAppliedConfigAnnotation)
	}
	return evaluator.VM{Name: vm.Name, Namespace: vm.Namespace, UID: string(vm.UID), Labels: vm.Labels,
		Annotations: annotations, Phase: string(vm.Status.Phase), CreationTimestamp: vm.CreationTimestamp.Time}
}

// input builds the evaluator's view of one interface (DESIGN.md §3.1).
func input(s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry) evaluator.Input {
	vm := s.vm
	in := evaluator.Input{
		VM: vmInput(vm),
		Interface: evaluator.Interface{Index: int64(it.index), ID: deref(it.spec.ID), Type: string(it.spec.Type),
			Name: it.spec.Name, IPAddressName: it.spec.IPAddressName, MACAddress: statusMAC(vm, it.index),
			Spec: evaluator.InterfaceSpec{ID: deref(it.spec.ID), Type: string(it.spec.Type), Name: it.spec.Name,
				VirtualMachineMACAddressName: it.spec.VirtualMachineMACAddressName, IPAddressName: it.spec.IPAddressName}},
		Network:   networkInput(it.network),
		Holders:   it.holders,
		Namespace: namespaceInput(s),
	}
	if it.spec.IPAddressName != "" {
		in.IPAddress = ipAddressInput(it.spec.IPAddressName, it.static)
	} else {
		in.IPAddress = ipAddressInput(it.autoName, it.auto)
	}
	in.Change = requested(s, it, applied)
	return in
}

// statusMAC is the macAddress of the status.networks entry matched to spec.networks[index]:
// the entry of the same type and name, the nth such for the nth such spec entry (the rule by
// which status entries are matched to spec entries); "" when there is none.
func statusMAC(vm *vmv1.VirtualMachine, index int) string {
	if index < 0 || index >= len(vm.Spec.Networks) {
		return ""
	}
	spec, nth := vm.Spec.Networks[index], 0
	for _, n := range vm.Spec.Networks[:index] {
		if n.Type == spec.Type && n.Name == spec.Name {
			nth++
		}
	}
	for _, st := range vm.Status.Networks {
		if st.Type == spec.Type && st.Name == spec.Name {
			if nth == 0 {
				return st.MACAddress
			}
			nth--
		}
	}
	return ""
}

func networkInput(n *networkInfo) evaluator.Network {
	out := evaluator.Network{Exists: n.exists, Ready: n.ready, Type: n.typ, Labels: n.labels}
	if n.pool != nil {
		out.IPAMEnabled = true
		out.Pool = evaluator.Ref{Kind: n.pool.Kind, Name: n.pool.Name}
	}
	return out
}

// ipAddressInput describes the IPAddress named name; ip is nil when it does not exist.
func ipAddressInput(name string, ip *sdnv1.IPAddress) evaluator.IPAddress {
	if ip == nil {
		return evaluator.IPAddress{Name: name}
	}
	out := evaluator.IPAddress{Exists: true, Name: ip.Name, Type: string(ip.Spec.Type),
		NetworkRef: evaluator.Ref{Kind: ip.Spec.NetworkRef.Kind, Name: ip.Spec.NetworkRef.Name},
		Phase:      string(ip.Status.Phase), Address: ip.Status.Address, Allocated: allocated(ip)}
	if c := meta.FindStatusCondition(ip.Status.Conditions, sdnv1.ConditionAllocated); c != nil {
		out.Reason = c.Reason
	}
	if ref := index.ControllerVM(ip); ref != nil {
		out.Owner = evaluator.Owner{Name: ref.Name, UID: string(ref.UID)}
	}
	return out
}

// allocated is SDN's verdict that the IPAddress holds an address: condition Allocated=True
// (or, for SDN versions without the condition, phase Allocated) and a non-empty address.
func allocated(ip *sdnv1.IPAddress) bool {
	if ip.Status.Address == "" {
		return false
	}
	if c := meta.FindStatusCondition(ip.Status.Conditions, sdnv1.ConditionAllocated); c != nil {
		return c.Status == "True"
	}
	return ip.Status.Phase == sdnv1.IPAddressPhaseAllocated
}

// decideOutcome decides an interface so that every expression sees, in change, the change
// that will be applied (docs/POLICIES.md, "The change input"). The policies decide the
// allocation and whether to skip, so the outcome is known only after a decision: the first
// one is made with change describing what the spec asks for (requested); when the outcome it
// leads to differs from that (a policy chose another allocation, a rule refused the
// interface, a transient problem keeps what runs), the interface is decided again with change
// describing the outcome, and that second decision stands. An interface whose evaluation
// failed keeps the first decision: it decided nothing to compare.
func decideOutcome(evalCtx context.Context, s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry, opts evaluator.Options) evaluator.Decision {
	in := input(s, it, applied)
	d := decideWithin(evalCtx, s.set, in, opts)
	if d.Allocation == evaluator.AllocationUnknown {
		return d
	}
	if c := outcome(s, it, applied, d); c != in.Change {
		in.Change = c
		d = decideWithin(evalCtx, s.set, in, opts)
	}
	return d
}

// requested is the change the spec asks for against what is applied now (appliedList: the
// running pod's networks-spec when the VM runs, else what the record last attached): to is
// Static when ipAddressName is set, Auto on a pooled network, else None.
func requested(s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry) evaluator.Change {
	to := evaluator.ChangeState{IPAddressName: it.spec.IPAddressName, Allocation: string(evaluator.AllocationNone)}
	switch {
	case it.spec.IPAddressName != "":
		to.Allocation = string(evaluator.AllocationStatic)
	case it.network.pool != nil:
		to.Allocation = string(evaluator.AllocationAuto)
	}
	return changeTo(s, it, applied, to)
}

// outcome is the change decision d makes against what is applied: to is what the interface
// will carry — d's allocation with its IPAddress when attached; what is applied when a
// transient problem keeps it (transientReasons, as the record keeps it); nothing ("") when d
// does not attach it.
func outcome(s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry, d evaluator.Decision) evaluator.Change {
	var to evaluator.ChangeState
	entry, had := applied[it.key]
	switch {
	case !d.Skip:
		to.Allocation = string(d.Allocation)
		if d.Allocation == evaluator.AllocationStatic {
			to.IPAddressName = it.spec.IPAddressName
		}
	case had && transientReasons[string(d.Reason)]:
		to = appliedState(entry, it.autoName)
	}
	return changeTo(s, it, applied, to)
}

// changeTo is the change from what is applied to the interface to to; a zero to (allocation
// "") is the interface not attached.
func changeTo(s *scope, it *iface, applied map[string]sdnv1.NetworksSpecEntry, to evaluator.ChangeState) evaluator.Change {
	c := evaluator.Change{To: to, VMRunning: len(s.pods) > 0}
	if entry, ok := applied[it.key]; ok {
		c.From = appliedState(entry, it.autoName)
	}
	switch {
	case c.From == c.To:
		c.Kind = evaluator.ChangeNone
	case c.From.Allocation == "":
		c.Kind = evaluator.ChangeAdd
	case c.To.Allocation == "":
		c.Kind = evaluator.ChangeRemove
	case c.From.Allocation != c.To.Allocation:
		c.Kind = evaluator.ChangeModeChange
	default:
		c.Kind = evaluator.ChangeAddressChange
	}
	return c
}

// decideRemoved asks the policies, for every interface the running pod carries and the spec no
// longer names, whether its removal may be applied to the running VM (change.kind
// Remove; the evaluator decides only hotplug for it). The input describes what was applied:
// the interface and the change; its network and IPAddress are not looked up.
func decideRemoved(ctx, evalCtx context.Context, s *scope, opts evaluator.Options) {
	if len(s.pods) == 0 { // a stopped VM's next start simply lacks it: nothing to ask
		return
	}
	inSpec := map[string]bool{}
	for _, it := range s.interfaces {
		inSpec[it.key] = true
	}
	for _, e := range appliedList(s) {
		key := index.NetworkKey(e.Type, e.Name)
		if inSpec[key] || ctx.Err() != nil {
			continue
		}
		inSpec[key] = true // a repeated entry is one interface
		it := &iface{index: -1, key: key, dupOf: -1, spec: vmv1.NetworksSpec{Type: vmv1.NetworkType(e.Type), Name: e.Name},
			autoName: naming.AutoIPAddress(s.vm.Name, e.Type, e.Name)}
		from := appliedState(e, it.autoName)
		it.spec.IPAddressName = from.IPAddressName
		in := evaluator.Input{
			VM: vmInput(s.vm),
			Interface: evaluator.Interface{Index: -1, ID: e.ID, Type: e.Type, Name: e.Name, IPAddressName: from.IPAddressName,
				Spec: evaluator.InterfaceSpec{ID: e.ID, Type: e.Type, Name: e.Name, IPAddressName: from.IPAddressName}},
			Namespace: namespaceInput(s),
			Change:    evaluator.Change{Kind: evaluator.ChangeRemove, From: from, VMRunning: len(s.pods) > 0},
		}
		it.decision = decideWithin(evalCtx, s.set, in, opts)
		s.removed = append(s.removed, it)
	}
}

func namespaceInput(s *scope) evaluator.Namespace {
	out := evaluator.Namespace{Name: s.vm.Namespace}
	if s.namespace != nil {
		out.Labels = s.namespace.Labels
	}
	return out
}

func appliedState(e sdnv1.NetworksSpecEntry, autoName string) evaluator.ChangeState {
	switch {
	case len(e.IPAddressNames) == 0:
		return evaluator.ChangeState{Allocation: string(evaluator.AllocationNone)}
	case e.IPAddressNames[0] == autoName:
		return evaluator.ChangeState{Allocation: string(evaluator.AllocationAuto)}
	default:
		return evaluator.ChangeState{Allocation: string(evaluator.AllocationStatic), IPAddressName: e.IPAddressNames[0]}
	}
}

// appliedEntries indexes appliedList by network key.
func appliedEntries(s *scope) map[string]sdnv1.NetworksSpecEntry {
	out := map[string]sdnv1.NetworksSpecEntry{}
	for _, e := range appliedList(s) {
		out[index.NetworkKey(e.Type, e.Name)] = e
	}
	return out
}

// appliedList is what is applied: the oldest running launcher pod's networks-spec when the VM
// runs, else what the VM's record decides to attach (the record is vmipam's memory of a
// stopped VM: its next start gets that; s.nextStart when set).
func appliedList(s *scope) []sdnv1.NetworksSpecEntry {
	if len(s.pods) > 0 {
		return parseNetworksSpec(s.pods[0].Annotations[sdnv1.AnnotationNetworksSpec])
	}
	rec := s.record
	if s.nextStart != nil {
		rec = s.nextStart
	}
	if rec == nil || rec.Spec.VMUID != s.vm.UID {
		return nil
	}
	var out []sdnv1.NetworksSpecEntry
	for i := range rec.Spec.Interfaces {
		if d := &rec.Spec.Interfaces[i]; d.Attach && !d.Removed {
			out = append(out, consumer.Entry(d, ""))
		}
	}
	return out
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
