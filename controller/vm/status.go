package vm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
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
			Message: "Changes of these interfaces apply at the next restart: " + strings.Join(interfaceLabels(s.pending), ", ")})
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
				entry.IPAddress = address(s, it)
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

// address is the allocated address of the IPAddress the interface's attached NIC carries —
// what the guest uses, also when a transient problem or a change held back until restart keeps
// an older entry than the spec asks for — or "" when the interface is not attached or has no
// address.
func address(s *scope, it *iface) string {
	if it.attached == nil || len(it.attached.IPAddressNames) == 0 {
		return ""
	}
	return addressOf(s.ipAddresses[it.attached.IPAddressNames[0]])
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

// InterfaceLabel is an interface's key ("<Type>/<name>", index.NetworkKey) as the NetworkReady
// message, the AwaitingRestartToApplyConfiguration message, events and ipamctl show it: the name
// through evaluator.QuoteName. The VirtualMachine CRD accepts any spec.networks[].name, and a
// name holding "; ", a line break or a bidi override would otherwise forge items of the
// condition. The type is an enum of the CRD and needs no quoting.
func InterfaceLabel(key string) string {
	typ, name, ok := strings.Cut(key, "/")
	if !ok {
		return evaluator.QuoteName(key)
	}
	return typ + "/" + evaluator.QuoteName(name)
}

// interfaceLabels is InterfaceLabel of every key, in order.
func interfaceLabels(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = InterfaceLabel(k)
	}
	return out
}

// problemItems are the NetworkReady items, "<Type>/<name>: <Reason>: <message>", in spec order.
func problemItems(s *scope) []string {
	n := 0
	for _, it := range s.interfaces {
		if it.problem != nil {
			n++
		}
	}
	var items []string
	for _, it := range s.interfaces {
		if it.problem != nil {
			items = append(items, problemItem(InterfaceLabel(it.key), it.problem.reason, it.problem.message, n))
		}
	}
	return items
}

// maxItemLength bounds one NetworkReady item: with 31 interfaces not ready, every item still
// fits the condition's maxConditionMessage.
const maxItemLength = 1024

// minItemLength is the least an item is cut to when many interfaces share the condition.
const minItemLength = 128

// problemItem is one interface's NetworkReady item — and its event's note — of n items:
// "<label>: <reason>: <message>" (label: InterfaceLabel, already safe; the reason quoted like a
// name, in case a policy stored before the CRD's reason pattern holds another) made safe and cut to maxItemLength bytes, less when n items of
// that length would not fit the condition. Whatever wrote the message (a policy's static
// message stored before it was checked, an evaluation error quoting a 256 KiB input value), it
// cannot forge an item nor push the other interfaces' items out of the condition.
func problemItem(label, reason, message string, n int) string {
	bound := maxItemLength
	if n > 0 {
		bound = max(minItemLength, min(maxItemLength, (maxConditionMessage-len("; ")*(n-1))/n))
	}
	return truncate(fmt.Sprintf("%s: %s: %s", label, evaluator.QuoteName(reason), evaluator.SafeMessage(message)), bound)
}

// +kubebuilder:rbac:groups=virtualization.deckhouse.io,resources=virtualmachines/status,verbs=patch

// writeStatus patches status when the plan changed it. The desired status was computed from
// s.vm, the object observed, so the patch is computed from s.vm too: never from a copy
// refreshed by an earlier write of this reconcile, which may carry another writer's newer
// status that the patch would then undo (cluster-api's patch helper snapshots before any change
// for the same reason). live is the VM as this reconcile's networks-spec patch returned it, or
// nil.
//
// The write is a JSON patch of vmipam's own entries, each tested to be where it was read
// (statusJSONPatch), so another writer's status, metadata or spec change since the read costs
// nothing and loses nothing. When the lists must be built or reshaped (the VM's first status,
// a spec entry added or removed), the whole lists are written by a merge patch under the
// observed resourceVersion as optimistic lock — or under live's, when live's status and
// generation are still the observed ones; otherwise another writer got in between and the
// reconcile is retried. Events follow a successful write only, so a conflict retry does not
// repeat them.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope, live *vmv1.VirtualMachine, p *Plan) error {
	if !p.StatusChanged {
		return nil
	}
	var err error
	if ops, ok := statusJSONPatch(&s.vm.Status, &p.Status); ok {
		err = r.patchStatusEntries(ctx, s, live, ops, &p.Status)
	} else {
		err = r.patchStatusLocked(ctx, s, live, p)
	}
	if err != nil {
		return err
	}
	r.announceSkips(s, p)
	return nil
}

// patchStatusEntries applies a statusJSONPatch. The expectation of the write is verified only
// when what the API server returned is the VM as last seen (live, else the observed one) with
// vmipam's status and nothing else: another writer's change in between must bring its event.
func (r *Reconciler) patchStatusEntries(ctx context.Context, s *scope, live *vmv1.VirtualMachine, ops []jsonPatchOp, desired *vmv1.VirtualMachineStatus) error {
	data, err := marshalOps(ops)
	if err != nil {
		return err
	}
	base := s.vm
	if live != nil {
		base = live
	}
	// A fresh object to decode the answer into: decoding into a copy of base would keep
	// fields the answer no longer has.
	written := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: base.Namespace, Name: base.Name}}
	s.news = r.issue(written, func() {
		if err = r.Client.Status().Patch(ctx, written, client.RawPatch(types.JSONPatchType, data)); err == nil {
			r.expectations().expectPatched(base, written, onlyOurStatus(base, written, desired))
		}
	}) || s.news
	if err != nil {
		return fmt.Errorf("patch status: %w", errFromStatusPatch(err, s.vm.Name))
	}
	return nil
}

// patchStatusLocked merge-patches the whole status vmipam computed under an optimistic lock:
// the observed resourceVersion, or live's when live still has the observed status.
func (r *Reconciler) patchStatusLocked(ctx context.Context, s *scope, live *vmv1.VirtualMachine, p *Plan) error {
	base := s.vm.DeepCopy()
	if live != nil {
		if live.Generation != s.vm.Generation || !equality.Semantic.DeepEqual(live.Status, s.vm.Status) {
			return apierrors.NewConflict(vmv1.GroupVersion.WithResource("virtualmachines").GroupResource(), s.vm.Name,
				errors.New("status or spec changed while networks-spec was written"))
		}
		base.ResourceVersion = live.ResourceVersion
	}
	desired := base.DeepCopy()
	desired.Status = p.Status
	var err error
	s.news = r.issue(desired, func() {
		if err = r.Client.Status().Patch(ctx, desired, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err == nil {
			// The optimistic lock proves that desired is base with vmipam's status and nothing else.
			r.expectations().expectPatched(base, desired, true)
		}
	}) || s.news
	if err != nil {
		return fmt.Errorf("patch status: %w", err)
	}
	return nil
}

// onlyOurStatus reports whether written (as the API server answered a status patch) is base
// with status desired and nothing else vmipam reads changed. Condition times are compared at
// the second, the precision the API stores.
func onlyOurStatus(base, written *vmv1.VirtualMachine, desired *vmv1.VirtualMachineStatus) bool {
	d := desired.DeepCopy()
	for i := range d.Conditions {
		d.Conditions[i].LastTransitionTime = d.Conditions[i].LastTransitionTime.Rfc3339Copy()
	}
	return sameMeta(&base.ObjectMeta, &written.ObjectMeta) && base.Spec.RunPolicy == written.Spec.RunPolicy &&
		equality.Semantic.DeepEqual(base.Spec.Networks, written.Spec.Networks) &&
		base.Annotations[sdnv1.AnnotationNetworksSpec] == written.Annotations[sdnv1.AnnotationNetworksSpec] &&
		equality.Semantic.DeepEqual(*d, written.Status)
}

// announceSkips emits one Warning per skipped interface whose item is new since the last
// NetworkReady (of the observed VM), so that a steady state produces no events. The event's
// reason is the skip reason and its related object the interface's IPAddress, because the
// events API aggregates by (reason, action, regarding, related) and would otherwise fold
// different problems into one series.
func (r *Reconciler) announceSkips(s *scope, p *Plan) {
	prev := ""
	if c := meta.FindStatusCondition(s.vm.Status.Conditions, ConditionNetworkReady); c != nil && c.Status == metav1.ConditionFalse {
		prev = c.Message
	}
	n := 0
	for _, res := range p.Interfaces {
		if res.Reason != "" {
			n++
		}
	}
	for i, res := range p.Interfaces { // one result per observed interface, in the same order
		if res.Reason == "" {
			continue
		}
		// The item as the condition holds it, so that an item already there brings no event.
		item := problemItem(InterfaceLabel(s.interfaces[i].key), res.Reason, res.Message, n)
		if !strings.Contains(prev, item) {
			r.event(s.vm, relatedIPAddress(s.interfaces[i]), corev1.EventTypeWarning, res.Reason, "Skip", "%s", item)
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
