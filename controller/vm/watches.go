package vm

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/plan"
	"github.com/vmipam/vmipam/controller/reads"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// RBAC for what the VM reconciler reads through the cache (list and watch) and gets.
// +kubebuilder:rbac:groups=virtualization.deckhouse.io,resources=virtualmachines,verbs=get;list;watch
// +kubebuilder:rbac:groups=network.deckhouse.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=network.deckhouse.io,resources=networks;clusternetworks,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods;namespaces,verbs=list;watch

// watches wires every input of a VM's decisions to the VMs it affects; every mapping is an
// indexed cache read.
func (r *Reconciler) watches(b *builder.Builder) *builder.Builder {
	b = b.Named("virtualmachine").
		For(&vmv1.VirtualMachine{}, builder.WithPredicates(readChanged())).
		// A VM's spec change can free or contest a static IPAddress others name.
		Watches(&vmv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.peersOfVM), builder.WithPredicates(contendsChanged())).
		Watches(&sdnv1.IPAddress{}, r.newAnsweredFirst()).
		Watches(&sdnv1.Network{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNetwork), builder.WithPredicates(readChanged())).
		Watches(&sdnv1.ClusterNetwork{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNetwork), builder.WithPredicates(readChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.vmOfPod), builder.WithPredicates(readChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.contendersOfPod), builder.WithPredicates(readChanged())).
		// A record edited or deleted by anyone else is rewritten; vmipam's own writes enqueue nothing.
		Watches(&v1alpha1.VirtualMachineIPAM{}, handler.EnqueueRequestsFromMapFunc(vmOfRecord), builder.WithPredicates(r.recordChangedByOthers())).
		// A record that attaches or lets go of a static IPAddress changes who holds it.
		Watches(&v1alpha1.VirtualMachineIPAM{}, handler.EnqueueRequestsFromMapFunc(r.contendersOfRecord),
			builder.WithPredicates(staticNamesChanged())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles})
	if r.PolicyChanges != nil {
		fanOut := &policyFanOut{r: r, seen: map[string]v1alpha1.Match{}}
		b = b.WatchesRawSource(source.Channel(r.PolicyChanges, fanOut))
	}
	if r.SDNStalls != nil {
		b = b.WatchesRawSource(source.Channel(r.SDNStalls, handler.EnqueueRequestsFromMapFunc(r.vmsWaitingForSDN)))
	}
	return b
}

// vmsWaitingForSDN maps SDN's stall notice to the VMs whose Auto IPAddresses SDN has not
// answered: once SDN is quiet their grace runs out (plan.UnansweredGrace after its last
// answer), and their requeue, set for the backlog's longer grace, would come too late.
func (r *Reconciler) vmsWaitingForSDN(ctx context.Context, _ client.Object) []reconcile.Request {
	var list sdnv1.IPAddressList // only read: no deep copy of every IPAddress
	if err := r.Client.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing IPAddresses after SDN fell quiet; their VMs are reconciled at their own retry")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		ip := &list.Items[i]
		if req, _, ok := controllerVM(ip); ok && !ip.Status.Answered() {
			out = append(out, req)
		}
	}
	return out
}

func requests(list []vmv1.VirtualMachine) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(list))
	for i := range list {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list[i])})
	}
	return out
}

// listVMs lists VMs from the cache as requests. A map function cannot return an error; a
// failed List (the cache is not synced, an index is missing) is logged, because the events it
// would have mapped are lost.
func (r *Reconciler) listVMs(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	var list vmv1.VirtualMachineList // only the keys are read: no deep copy of every VM
	if err := r.Client.List(ctx, &list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachines to enqueue; the event is not mapped")
		return nil
	}
	return requests(list.Items)
}

// peersOfVM: a VM's change can free or contest the static IPAddresses it names, for the
// other VMs naming them (its own watch brings the VM itself).
func (r *Reconciler) peersOfVM(ctx context.Context, o client.Object) []reconcile.Request {
	vm, ok := o.(*vmv1.VirtualMachine)
	if !ok {
		return nil
	}
	var names []string
	for _, n := range vm.Spec.Networks {
		if n.IPAddressName != "" {
			names = append(names, n.IPAddressName)
		}
	}
	return others(r.vmsNaming(ctx, vm.Namespace, names), client.ObjectKeyFromObject(vm))
}

// others is reqs without the VM self: a contender's own change reaches its reconcile through
// its own watch (For, vmOfPod, the record's), filtered there by what it changed.
func others(reqs []reconcile.Request, self types.NamespacedName) []reconcile.Request {
	return slices.DeleteFunc(reqs, func(r reconcile.Request) bool { return r.NamespacedName == self })
}

// contendsChanged lets through the events of a VM that change what its contenders read of it
// (holders): its creation and deletion, its spec.networks (the static IPAddresses it names,
// on which network) and its deletion's start — not the status the virtualization controller
// writes on every change.
func contendsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*vmv1.VirtualMachine)
		n, ok2 := e.ObjectNew.(*vmv1.VirtualMachine)
		return !ok1 || !ok2 || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
			!equality.Semantic.DeepEqual(o.Spec.Networks, n.Spec.Networks)
	}}
}

// vmsNaming returns the VMs of the namespace whose spec names any of the IPAddresses.
func (r *Reconciler) vmsNaming(ctx context.Context, namespace string, names []string) []reconcile.Request {
	var out []reconcile.Request
	for _, name := range names {
		out = append(out, r.listVMs(ctx, client.InNamespace(namespace), client.MatchingFields{index.VMIPAddressName: name})...)
	}
	return out
}

// vmsOfIPAddress maps an IPAddress to the VMs naming it and its controlling VM.
func (r *Reconciler) vmsOfIPAddress(ctx context.Context, o client.Object) []reconcile.Request {
	out := r.namersOf(ctx, o)
	if req, _, ok := controllerVM(o); ok {
		out = append(out, req)
	}
	return out
}

// controllerVM is the request of the VM controlling o (its controller owner reference, in
// o's namespace) and that VM's UID; false when no VM controls o.
func controllerVM(o client.Object) (reconcile.Request, types.UID, bool) {
	ref := index.ControllerVM(o)
	if ref == nil {
		return reconcile.Request{}, "", false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}, ref.UID, true
}

// namersOf maps an IPAddress to the VMs whose spec names it.
func (r *Reconciler) namersOf(ctx context.Context, o client.Object) []reconcile.Request {
	return r.listVMs(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.VMIPAddressName: o.GetName()})
}

func (r *Reconciler) vmsOfNetwork(ctx context.Context, o client.Object) []reconcile.Request {
	switch o.(type) {
	case *sdnv1.Network:
		return r.listVMs(ctx, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{index.VMNetwork: index.NetworkKey(sdnv1.KindNetwork, o.GetName())})
	case *sdnv1.ClusterNetwork:
		return r.listVMs(ctx, client.MatchingFields{index.VMNetwork: index.NetworkKey(sdnv1.KindClusterNetwork, o.GetName())})
	}
	return nil
}

// vmOfPod maps a launcher pod to its VM.
func (r *Reconciler) vmOfPod(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[vmv1.LabelLauncherVMName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// vmOfRecord maps a decision record to its VM, which has the same name.
func vmOfRecord(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// contendersOfRecord maps a decision record to the other VMs naming the static IPAddresses it
// attaches or hands over: a record that lets an address go starts its handoff to them. Its own
// VM wrote it, or hears of someone else's write through recordChangedByOthers.
func (r *Reconciler) contendersOfRecord(ctx context.Context, o client.Object) []reconcile.Request {
	rec, ok := o.(*v1alpha1.VirtualMachineIPAM)
	if !ok {
		return nil
	}
	return others(r.vmsNaming(ctx, rec.Namespace, staticNames(rec)), client.ObjectKeyFromObject(rec))
}

// staticNames are the static IPAddress names a record attaches or hands over.
func staticNames(rec *v1alpha1.VirtualMachineIPAM) []string {
	return append(attachedStatic(rec), releasedStatic(rec)...)
}

// attachedStatic are the static IPAddress names a record attaches.
func attachedStatic(rec *v1alpha1.VirtualMachineIPAM) []string {
	var out []string
	for _, d := range rec.Spec.Interfaces {
		if d.Attach && d.Allocation == v1alpha1.AllocationStatic {
			out = append(out, d.IPAddressName)
		}
	}
	return out
}

// releasedStatic are the static IPAddress names a record hands over.
func releasedStatic(rec *v1alpha1.VirtualMachineIPAM) []string {
	var out []string
	for _, rel := range rec.Spec.Releases {
		if rel.Type == v1alpha1.ReleaseStatic {
			out = append(out, rel.IPAddressName)
		}
	}
	return out
}

// contendersOfPod maps a launcher pod to the other VMs contending for the IPAddresses it
// carries (a pod that lets an address go frees it for them); its own VM hears of it through
// vmOfPod.
func (r *Reconciler) contendersOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	vm := o.GetLabels()[vmv1.LabelLauncherVMName]
	if vm == "" {
		return nil
	}
	return others(r.vmsNaming(ctx, o.GetNamespace(), index.CarriedNames(o.GetAnnotations()[sdnv1.AnnotationNetworksSpec])),
		types.NamespacedName{Namespace: o.GetNamespace(), Name: vm})
}

func (r *Reconciler) vmsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.listVMs(ctx, client.InNamespace(o.GetName()))
}

// AnsweredPriority is the work-queue priority of a VM whose IPAddress SDN has just answered
// (allocated, or refused): above the default 0 of new and changed VMs, so a VM whose addresses
// arrived is finished — networks-spec, status, hotplug — before the controller starts on VMs
// that only need their IPAddresses created. Without it, 1,000 VMs created at once all get their
// IPAddresses first and their addresses only after the last one, and the controller's IPAddress
// and VM writes run one after the other instead of side by side.
const AnsweredPriority = 10

// answeredFirst enqueues the VMs of an IPAddress like mapped does, but at AnsweredPriority when
// an update carries SDN's answer (status.phase or status.address changed) and the queue is
// controller-runtime's priority queue.
type answeredFirst struct {
	mapped handler.EventHandler // handler.EnqueueRequestsFromMapFunc(vmsOfIPAddress)
	// namersOf maps an IPAddress to the VMs naming it; siblingUnanswered reports whether the
	// VM of the UID has another Auto IPAddress SDN has not answered yet (SiblingAnswerWait).
	namersOf          handler.MapFunc
	siblingUnanswered func(ctx context.Context, ip client.Object, vmUID types.UID) bool
	// namers enqueues only the VMs naming the IPAddress; own, when set, tells vmipam's own
	// creations apart.
	namers handler.EventHandler
	own    *writeExpectations
	// stalled, when set, is Reconciler.SDNStalled.
	stalled func(*sdnv1.IPAddress) bool
}

// newAnsweredFirst returns the answeredFirst handler of the reconciler's IPAddress watch.
func (r *Reconciler) newAnsweredFirst() answeredFirst {
	return answeredFirst{mapped: handler.EnqueueRequestsFromMapFunc(r.vmsOfIPAddress),
		namersOf: r.namersOf, siblingUnanswered: r.siblingUnanswered,
		namers: handler.EnqueueRequestsFromMapFunc(r.namersOf), own: r.expectations(), stalled: r.SDNStalled}
}

// Create implements handler.EventHandler. The creation of an IPAddress vmipam created itself,
// exactly as it created it, shows its VM nothing new (the creating reconcile planned with it):
// only the VMs naming it hear of it — unless SDN's stall notice for its network is due, and
// may have been taken before the cache showed it (lateForStall). While the create is in
// flight the verdict waits for its answer (writeExpectations.shouldEnqueue).
func (h answeredFirst) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.own != nil && !h.own.shouldEnqueue(keyOf(e.Object), func() bool { return !h.own.creationObserved(e.Object) }) &&
		!h.lateForStall(e.Object) {
		h.namers.Create(ctx, e, q)
		return
	}
	h.mapped.Create(ctx, e, q)
}

// lateForStall reports whether o is an IPAddress SDN has not answered on a network whose
// stall notice is due in this quiet spell (backlog.Tracker.Stalled). The notice brings back
// the VMs of the IPAddresses the cache shows when it is taken; the creating reconcile may
// have planned to wait for this one's answer up to plan.BacklogGrace (SDN was still answering
// there when it looked: plan's createdLeft), so its VM must look again now, or its wait is
// reported 10 minutes late instead of plan.UnansweredGrace after its creation.
func (h answeredFirst) lateForStall(o client.Object) bool {
	ip, ok := o.(*sdnv1.IPAddress)
	return ok && h.stalled != nil && !ip.Status.Answered() && h.stalled(ip)
}

// Update implements handler.EventHandler. An update of nothing vmipam reads (reads.Changed:
// SDN's node agent marking the address Attached, its usedByPods) wakes nobody.
func (h answeredFirst) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.own != nil {
		h.own.creationObserved(e.ObjectNew)
	}
	if !reads.Changed(e.ObjectOld, e.ObjectNew) {
		return
	}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || !answered(e.ObjectOld, e.ObjectNew) {
		h.mapped.Update(ctx, e, q)
		return
	}
	vms, later := h.answeredVMs(ctx, e.ObjectNew)
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(AnsweredPriority)}, vms...)
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(AnsweredPriority), After: SiblingAnswerWait}, later...)
	// The moment SDN's answer reached the controller (the handler runs as the informer
	// delivers the event: seen and enqueued are one instant, but for the VMs that wait for a
	// sibling's answer, "waitingForSiblings"): the scale suite's hotplug timeline reads it at
	// --zap-log-level=5.
	logf.FromContext(ctx).V(5).Info(AnsweredLog, "ipaddress", klog.KObj(e.ObjectNew), "vms", len(vms), "waitingForSiblings", len(later))
}

// SiblingAnswerWait is how long the reconcile of a VM whose Auto IPAddress SDN has just
// answered waits for the answer to another of its Auto IPAddresses that SDN has not answered
// yet: plan.FreshPendingGrace, as long as a record may wait for a fresh allocation anyway.
// vmipam creates a VM's Auto IPAddresses together and SDN answers them one after the other,
// within milliseconds or, in a backlog, about a second apart (at N=2,000 on the bench's two
// cores: 0.26 s p50, 1.5 s p99, 3.0 s at most). A reconcile at each answer found the first
// one's sibling unanswered, deferred the record (plan.Plan.Deferred) and wrote nothing — one
// reconcile per VM and extra address. The last answer enqueues the VM at once, which ends
// the wait. Only siblings created with the answered address count (siblingUnanswered). An
// answered interface waits longer than before only when its VM's record would not have
// waited for the sibling (another interface's problem is reported at once), and then at most
// this long.
const SiblingAnswerWait = plan.FreshPendingGrace

// answeredVMs splits the VMs an IPAddress's answer concerns into those to reconcile at once
// (the VMs naming it; its controlling VM when none of that VM's other Auto IPAddresses waits
// for SDN) and those after SiblingAnswerWait (its controlling VM when one does).
func (h answeredFirst) answeredVMs(ctx context.Context, ip client.Object) (now, later []reconcile.Request) {
	now = h.namersOf(ctx, ip)
	if req, uid, ok := controllerVM(ip); ok {
		if h.siblingUnanswered(ctx, ip, uid) {
			later = append(later, req)
		} else {
			now = append(now, req)
		}
	}
	return now, later
}

// siblingUnanswered reports whether the VM of vmUID, controlling ip, has another Auto IPAddress, not
// being deleted, that SDN has not answered (no status written) and that was created with ip
// or after it (creation timestamps count whole seconds: within a second before ip's) — an
// address SDN is about to answer, not one left unanswered long before ip was created (a
// network SDN does not serve, an address on its way to release), which would hold every
// answer of the VM back for nothing. False when the cache cannot tell (the VM is then
// reconciled at once).
func (r *Reconciler) siblingUnanswered(ctx context.Context, ip client.Object, vmUID types.UID) bool {
	since := ip.GetCreationTimestamp().Add(-time.Second)
	found := false
	err := index.EachOwnedIPAddress(ctx, r.Client, ip.GetNamespace(), vmUID, func(o *sdnv1.IPAddress) { // only read: no copies
		found = found || o.Name != ip.GetName() && o.DeletionTimestamp == nil && !o.Status.Answered() && !o.CreationTimestamp.Time.Before(since)
	})
	return err == nil && found
}

// AnsweredLog is the message logged (V(5)) when an IPAddress answer enqueues its VMs first,
// with keys "ipaddress" (namespace/name) and "vms" (how many).
const AnsweredLog = "IPAddress answered, VMs enqueued first"

// Delete implements handler.EventHandler.
func (h answeredFirst) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.own != nil {
		h.own.creationObserved(e.Object)
	}
	h.mapped.Delete(ctx, e, q)
}

// Generic implements handler.EventHandler.
func (h answeredFirst) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.mapped.Generic(ctx, e, q)
}

// answered reports whether SDN's answer on an IPAddress changed between old and new.
func answered(old, new client.Object) bool {
	o, ok1 := old.(*sdnv1.IPAddress)
	n, ok2 := new.(*sdnv1.IPAddress)
	return ok1 && ok2 && (o.Status.Phase != n.Status.Phase || o.Status.Address != n.Status.Address)
}

// recordChangedByOthers lets through the events of a decision record that vmipam did not cause: a
// create, spec change, ownership change or deletion by anyone else — which the VM's reconcile
// undoes by writing its record again. The echo of vmipam's own write (writeExpectations) and the
// consumer's status updates pass over.
func (r *Reconciler) recordChangedByOthers() predicate.Funcs {
	own := r.expectations()
	theirs := func(o client.Object) bool {
		return own.shouldEnqueue(keyOf(o), func() bool { return !own.recordWriteObserved(o) })
	}
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return theirs(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() &&
				equality.Semantic.DeepEqual(e.ObjectOld.GetOwnerReferences(), e.ObjectNew.GetOwnerReferences()) {
				own.recordWriteObserved(e.ObjectNew) // a status update after vmipam's write: forget it
				return false
			}
			return theirs(e.ObjectNew)
		},
	}
}

// staticNamesChanged lets through the events of a record whose attached or handed-over static
// IPAddresses changed. The two are compared apart: a record that stops attaching an address
// and starts handing it over names it in both versions, and that change is the one the VMs
// waiting for the address must hear of (its handoff starts).
func staticNamesChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*v1alpha1.VirtualMachineIPAM)
		n, ok2 := e.ObjectNew.(*v1alpha1.VirtualMachineIPAM)
		return !ok1 || !ok2 || !slices.Equal(attachedStatic(o), attachedStatic(n)) ||
			!slices.Equal(releasedStatic(o), releasedStatic(n))
	}}
}

// readChanged lets through the updates of a VM, launcher pod or network that change what vmipam reads
// (reads.Changed). Creations and deletions always pass.
func readChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return reads.Changed(e.ObjectOld, e.ObjectNew) }}
}
