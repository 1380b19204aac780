package vm

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		For(&vmv1.VirtualMachine{}, builder.WithPredicates(r.newsOf())).
		// A VM's spec change can free or contest a static IPAddress others name.
		Watches(&vmv1.VirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.peersOfVM)).
		Watches(&sdnv1.IPAddress{}, r.newAnsweredFirst()).
		Watches(&sdnv1.Network{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNetwork)).
		Watches(&sdnv1.ClusterNetwork{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNetwork)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.vmOfPod), builder.WithPredicates(r.newsOf())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.contendersOfPod), builder.WithPredicates(podChanged())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles})
	if r.PolicyChanges != nil {
		fanOut := &policyFanOut{r: r, seen: map[string]v1alpha1.Match{}}
		b = b.WatchesRawSource(source.Channel(r.PolicyChanges, fanOut))
	}
	return b
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

// peersOfVM: a VM's change can free or contest the static IPAddresses it names or carries.
func (r *Reconciler) peersOfVM(ctx context.Context, o client.Object) []reconcile.Request {
	vm, ok := o.(*vmv1.VirtualMachine)
	if !ok {
		return nil
	}
	names := index.CarriedNames(vm.Annotations[sdnv1.AnnotationNetworksSpec])
	for _, n := range vm.Spec.Networks {
		if n.IPAddressName != "" {
			names = append(names, n.IPAddressName)
		}
	}
	return r.vmsNaming(ctx, vm.Namespace, names)
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
	if ref := index.ControllerVM(o); ref != nil {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}})
	}
	return out
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

// contendersOfPod maps a launcher pod to the VMs contending for the IPAddresses it carries (a
// pod that lets an address go frees it for them) — also after vmipam's own patch of the pod,
// which its own VM does not need to hear of.
func (r *Reconciler) contendersOfPod(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetLabels()[vmv1.LabelLauncherVMName] == "" {
		return nil
	}
	return r.vmsNaming(ctx, o.GetNamespace(), index.CarriedNames(o.GetAnnotations()[sdnv1.AnnotationNetworksSpec]))
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
	mapped handler.EventHandler // handler.EnqueueRequestsFromMapFunc(vmsOf)
	vmsOf  handler.MapFunc
	// namers enqueues only the VMs naming the IPAddress; own, when set, tells vmipam's own
	// creations apart.
	namers handler.EventHandler
	own    *ownWrites
}

// newAnsweredFirst returns the answeredFirst handler of the reconciler's IPAddress watch.
func (r *Reconciler) newAnsweredFirst() answeredFirst {
	return answeredFirst{mapped: handler.EnqueueRequestsFromMapFunc(r.vmsOfIPAddress), vmsOf: r.vmsOfIPAddress,
		namers: handler.EnqueueRequestsFromMapFunc(r.namersOf), own: r.expectations()}
}

// Create implements handler.EventHandler. The creation of an IPAddress vmipam created itself,
// exactly as it created it, shows its VM nothing new (the creating reconcile planned with it):
// only the VMs naming it hear of it. While the create is in flight the verdict waits for its
// answer (ownWrites.judge).
func (h answeredFirst) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.own != nil && !h.own.judge(keyOf(e.Object), func() bool { return !h.own.observedIPAddress(e.Object) }) {
		h.namers.Create(ctx, e, q)
		return
	}
	h.mapped.Create(ctx, e, q)
}

// Update implements handler.EventHandler.
func (h answeredFirst) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.own != nil {
		h.own.observedIPAddress(e.ObjectNew)
	}
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || !answered(e.ObjectOld, e.ObjectNew) {
		h.mapped.Update(ctx, e, q)
		return
	}
	vms := h.vmsOf(ctx, e.ObjectNew)
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(AnsweredPriority)}, vms...)
	// The moment SDN's answer reached the controller (the handler runs as the informer
	// delivers the event, so seen and enqueued are one instant): the scale suite's hotplug
	// timeline reads it at --zap-log-level=5.
	logf.FromContext(ctx).V(5).Info(AnsweredLog, "ipaddress", klog.KObj(e.ObjectNew), "vms", len(vms))
}

// AnsweredLog is the message logged (V(5)) when an IPAddress answer enqueues its VMs first,
// with keys "ipaddress" (namespace/name) and "vms" (how many).
const AnsweredLog = "IPAddress answered, VMs enqueued first"

// Delete implements handler.EventHandler.
func (h answeredFirst) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.own != nil {
		h.own.observedIPAddress(e.Object)
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

// newsOf lets through the updates of a VM or launcher pod that show the VM's reconcile
// something it has not seen: a change of what vmipam reads (changed), made by somebody else
// than vmipam's own patches (ownPatch, echoOfSpecWrite) — the reconcile that patched planned
// with that change already, and planning again on the result writes nothing. Creations and
// deletions always pass.
func (r *Reconciler) newsOf() predicate.Funcs {
	own := r.expectations()
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if !changed(e.ObjectOld, e.ObjectNew) {
			return false
		}
		return own.judge(keyOf(e.ObjectNew), func() bool {
			// Both run: each forgets the expectation the event meets.
			patched, echo := own.ownPatch(e.ObjectOld, e.ObjectNew), own.echoOfSpecWrite(e.ObjectOld, e.ObjectNew)
			return !patched && !echo
		})
	}}
}

// podChanged lets through the updates of launcher pods that change what vmipam reads.
func podChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return changed(e.ObjectOld, e.ObjectNew) }}
}

// changed reports whether two versions of a VM or pod differ in what vmipam reads: of a pod
// the VM label, the networks-spec annotation, the phase and deletion; of a VM everything the
// manager's cache keeps of its metadata and spec but the resourceVersion, and of its status
// what statusRead keeps (the cache transform and the Go type have already dropped the status
// fields the virtualization controller updates every few seconds, e.g. stats and guestOSInfo).
func changed(old, new client.Object) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		return !ok || o.Labels[vmv1.LabelLauncherVMName] != n.Labels[vmv1.LabelLauncherVMName] ||
			o.Annotations[sdnv1.AnnotationNetworksSpec] != n.Annotations[sdnv1.AnnotationNetworksSpec] ||
			o.Status.Phase != n.Status.Phase || !o.DeletionTimestamp.Equal(n.DeletionTimestamp)
	case *vmv1.VirtualMachine:
		n, ok := new.(*vmv1.VirtualMachine)
		if !ok {
			return true
		}
		a, b := o.ObjectMeta, n.ObjectMeta // shallow copies: the cache's objects stay untouched
		a.ResourceVersion, b.ResourceVersion, a.ManagedFields, b.ManagedFields = "", "", nil, nil
		return !equality.Semantic.DeepEqual(a, b) || !equality.Semantic.DeepEqual(o.Spec, n.Spec) ||
			!equality.Semantic.DeepEqual(readStatus(&o.Status), readStatus(&n.Status))
	}
	return true
}

// statusRead is what vmipam's decisions and writes depend on of a VM's status: the phase (a
// policy input), each status.networks entry's network and ipAddress in order (the holders of a
// static IPAddress; the entries vmipam's ipAddress goes into) and vmipam's own conditions. The
// rest — macAddress, id, the MAC address object's name, other writers' conditions,
// observedGeneration — vmipam only carries over unread, so a change of it alone shows a
// reconcile nothing new: vmipam's next write is computed from the cache as it is then, under a
// test or lock of what it read, and never needs this event.
// Its fields are exported for equality.Semantic, which refuses unexported ones.
type statusRead struct {
	Phase      vmv1.Phase
	Networks   []vmv1.NetworksStatus
	Conditions []metav1.Condition
}

// readStatus projects st onto statusRead.
func readStatus(st *vmv1.VirtualMachineStatus) statusRead {
	out := statusRead{Phase: st.Phase, Networks: make([]vmv1.NetworksStatus, 0, len(st.Networks))}
	for _, n := range st.Networks {
		out.Networks = append(out.Networks, vmv1.NetworksStatus{Type: n.Type, Name: n.Name, IPAddress: n.IPAddress})
	}
	for _, c := range st.Conditions {
		if c.Type == ConditionNetworkReady || c.Type == ConditionAwaitingRestart {
			out.Conditions = append(out.Conditions, c)
		}
	}
	return out
}
