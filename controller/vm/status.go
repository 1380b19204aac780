package vm

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// Conditions vmipam writes on a VirtualMachine, and their reasons.
const (
	// ConditionNetworkReady is True when every additional interface is attached.
	ConditionNetworkReady = "NetworkReady"
	// ReasonNetworkReady: every additional interface is attached.
	ReasonNetworkReady = "NetworkReady"
	// ReasonNetworkNotReady: at least one interface is skipped; the message has one
	// "<Type>/<name>: <Reason>: <message>" item per such interface, separated by "; ".
	ReasonNetworkNotReady = "NetworkNotReady"
	// ConditionAwaitingRestart is the virtualization platform's condition for changes that
	// apply at the next start; vmipam sets it when a policy forbids hotplugging a change.
	ConditionAwaitingRestart = "AwaitingRestartToApplyConfiguration"
	// ReasonChangesPendingRestart: vmipam's reason on ConditionAwaitingRestart. vmipam only
	// ever removes the condition when it carries this reason.
	ReasonChangesPendingRestart = "ChangesPendingRestart"
)

// maxConditionMessage is the maxLength of a condition message in the VirtualMachine CRD.
const maxConditionMessage = 32768

// desiredStatus computes the VM status vmipam wants from the reconcile's results: a pure
// function of what was observed and decided, never of vmipam's own earlier conditions. Fields
// and entries owned by other writers (phase, macAddress, other conditions) are kept.
func desiredStatus(s *scope) vmv1.VirtualMachineStatus {
	st := *s.vm.Status.DeepCopy()
	st.Networks = statusNetworks(s)
	meta.SetStatusCondition(&st.Conditions, networkReady(s))
	if len(s.pending) > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: ConditionAwaitingRestart,
			Status: metav1.ConditionTrue, Reason: ReasonChangesPendingRestart, ObservedGeneration: s.vm.Generation,
			Message: "Changes of these interfaces apply at the next restart: " + strings.Join(s.pending, ", ")})
	} else if c := meta.FindStatusCondition(st.Conditions, ConditionAwaitingRestart); c != nil &&
		c.Reason == ReasonChangesPendingRestart {
		meta.RemoveStatusCondition(&st.Conditions, ConditionAwaitingRestart)
	}
	return st
}

// statusNetworks has one entry per spec.networks entry — a repeated entry too, so that the
// virtualization controller, which writes one entry per spec entry as well, and vmipam agree —
// matched to the previous entries by (type, name) and occurrence, keeping the fields other
// writers own and setting ipAddress for attached interfaces with an address.
func statusNetworks(s *scope) []vmv1.NetworksStatus {
	byIndex := map[int]*iface{}
	for _, it := range s.interfaces {
		byIndex[it.index] = it
	}
	seen := map[string]int{}
	var out []vmv1.NetworksStatus
	for i, spec := range s.vm.Spec.Networks {
		key := string(spec.Type) + "/" + spec.Name
		entry := vmv1.NetworksStatus{ID: spec.ID, Type: spec.Type, Name: spec.Name,
			VirtualMachineMACAddressName: spec.VirtualMachineMACAddressName}
		if prev := findStatus(s.vm.Status.Networks, spec.Type, spec.Name, seen[key]); prev != nil {
			entry = *prev.DeepCopy()
		}
		seen[key]++
		if it := byIndex[i]; it != nil {
			entry.IPAddress = ""
			if it.dupOf < 0 {
				entry.IPAddress = address(it)
			}
		}
		out = append(out, entry)
	}
	return out
}

// findStatus returns the nth (from 0) entry of list for (typ, name), or nil.
func findStatus(list []vmv1.NetworksStatus, typ vmv1.NetworkType, name string, nth int) *vmv1.NetworksStatus {
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

// address is the allocated address of an attached interface — also of one a transient problem
// leaves attached as it was — or "".
func address(it *iface) string {
	if it.problem != nil && !it.kept {
		return ""
	}
	ip := it.auto
	switch {
	case it.decision.Allocation == evaluator.AllocationStatic, it.kept && it.spec.IPAddressName != "":
		ip = it.static
	case it.decision.Allocation == evaluator.AllocationAuto, it.kept:
	default:
		return ""
	}
	if ip == nil || !allocated(ip) {
		return ""
	}
	return ip.Status.Address
}

func networkReady(s *scope) metav1.Condition {
	c := metav1.Condition{Type: ConditionNetworkReady, ObservedGeneration: s.vm.Generation}
	items := problemItems(s)
	if len(items) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonNetworkReady
		c.Message = fmt.Sprintf("All additional network interfaces are attached (%d)", len(s.interfaces))
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, ReasonNetworkNotReady
	c.Message = truncate(strings.Join(items, "; "), maxConditionMessage)
	return c
}

// truncate returns s cut to at most max bytes, ending in "..." when cut. It cuts on a UTF-8
// character boundary: a cut character would be stored by the API server as U+FFFD, so the
// status read back would never equal the one computed and every reconcile would write it again.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// problemItems are the NetworkReady items, "<Type>/<name>: <Reason>: <message>", in spec order.
func problemItems(s *scope) []string {
	var items []string
	for _, it := range s.interfaces {
		if it.problem != nil {
			items = append(items, fmt.Sprintf("%s: %s: %s", it.key, it.problem.reason, it.problem.message))
		}
	}
	return items
}

// +kubebuilder:rbac:groups=virtualization.deckhouse.io,resources=virtualmachines/status,verbs=patch

// writeStatus patches status when the plan changed it, with optimistic locking so that a
// concurrent writer of other status fields is never overwritten with stale data.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope, p *Plan) error {
	if !p.StatusChanged {
		return nil
	}
	r.announceSkips(s)
	orig := s.vm.DeepCopy()
	s.vm.Status = p.Status
	if err := r.Client.Status().Patch(ctx, s.vm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// announceSkips emits one Warning per skipped interface whose item is new since the last
// NetworkReady, so that a steady state produces no events. The event's reason is the skip
// reason and its related object the interface's IPAddress, because the events API
// aggregates by (reason, action, regarding, related) and would otherwise fold different
// problems into one series.
func (r *Reconciler) announceSkips(s *scope) {
	prev := ""
	if c := meta.FindStatusCondition(s.vm.Status.Conditions, ConditionNetworkReady); c != nil && c.Status == metav1.ConditionFalse {
		prev = c.Message
	}
	for _, it := range s.interfaces {
		if it.problem == nil {
			continue
		}
		item := fmt.Sprintf("%s: %s: %s", it.key, it.problem.reason, it.problem.message)
		if !strings.Contains(prev, item) {
			r.event(s.vm, relatedIPAddress(it), corev1.EventTypeWarning, it.problem.reason, "Skip", "%s", item)
		}
	}
}

// relatedIPAddress is the IPAddress an interface uses, as an event's related object, or nil.
func relatedIPAddress(it *iface) runtime.Object {
	switch {
	case it.static != nil:
		return it.static
	case it.auto != nil:
		return it.auto
	}
	return nil
}
