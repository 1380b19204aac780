package virtualization

import (
	"cmp"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

// setupVM registers vc-stand-in-vm: VMs, the KVVMs they control, the launcher pods labelled
// with their names (launcherPodChanged), and their decision records (a record has its VM's
// name), all read from the manager's cache. The watch events of the stand-in's own writes bring
// no reconcile (notOwnEcho): the reconcile that wrote them acted on them already — but for the
// start of a deletion of its own (a Delete answers with no resourceVersion to recognise it by),
// which brings one reconcile that finds nothing to do.
func (s *Simulator) setupVM(mgr ctrl.Manager) error {
	echo := builder.WithPredicates(s.notOwnEcho())
	return ctrl.NewControllerManagedBy(mgr).
		Named("vc-stand-in-vm").
		For(newUnstructured(vmKind), echo).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(vmOfLauncherPod),
			builder.WithPredicates(launcherPodChanged(), s.notOwnEcho())).
		Owns(newUnstructured(KVVMKind), echo).
		Watches(&ipamv1.VirtualMachineIPAM{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
			}), echo).
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(reconcile.Func(s.ReconcileVirtualMachine))
}

// vmOfLauncherPod maps a pod to the VM its vm.kubevirt.io/name label names, whoever controls
// the pod: the real VC's PodWatcher (pkg/controller/vm/internal/watcher/pod_watcher.go) maps
// by the label, as KubeVirt's launcher pods are controlled by the KVVMI, not the VM. So a
// labelled pod no VM controls — one made from an older read of the template — wakes its VM,
// which applies the record to it (observeAllPods).
func vmOfLauncherPod(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[virtv1.LabelLauncherVMName]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}

// launcherPodChanged lets through what the real VC's PodWatcher does: every create and delete,
// and an update that changes the pod's phase or SDN's networks-status annotation — and, since
// envtest runs no kubelet, the start of its deletion: on a cluster the kubelet then stops the
// pod and changes its phase, which is what wakes VC; here nothing would, and a pod someone
// else deletes while a finalizer keeps it would never be replaced. Other pod writes
// (networks-spec, finalizers, other annotations) wake no VM.
func launcherPodChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		was, ok1 := e.ObjectOld.(*corev1.Pod)
		now, ok2 := e.ObjectNew.(*corev1.Pod)
		return !ok1 || !ok2 || was.Status.Phase != now.Status.Phase ||
			(was.DeletionTimestamp == nil) != (now.DeletionTimestamp == nil) ||
			was.Annotations[sdnv1.AnnotationNetworksStatus] != now.Annotations[sdnv1.AnnotationNetworksStatus]
	}}
}

// newUnstructured is an empty object of kind gvk.
func newUnstructured(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// vmState is what one reconcile of a VM reads.
type vmState struct {
	raw      *unstructured.Unstructured // the VM as read, with every field of the real CRD
	vm       *virtv1.VirtualMachine     // the same, typed, with the NICs' MACs ensured in status
	record   *ipamv1.VirtualMachineIPAM // nil when there is none
	template *template
	pods     []corev1.Pod // active launcher pods, oldest first
	// others are labelled launcher pods of the VM that no VM controls: a record is applied to
	// them too.
	others []corev1.Pod
	// kvvmWaits is set by apply when it leaves the running VM's KVVM template behind the pods
	// it patched until SDN has configured them (waitsForSDN): the VM shows
	// ConfigurationApplied=False, the record's generation is not observed yet, and the VM is
	// looked at again within SDNRecheck.
	kvvmWaits bool
}

// ReconcileVirtualMachine converges the VM's launcher pods to its run intent, applies its
// decision record to the KVVM template and the running pods, copies its annotations onto the
// pods, and writes its status and its record's. A VM that is gone loses its pods and KVVM.
func (s *Simulator) ReconcileVirtualMachine(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer s.lockVM(req.NamespacedName)()
	st, err := s.read(ctx, req.NamespacedName)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, s.collect(ctx, req.NamespacedName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if st.pods, st.others, err = s.converge(ctx, st.vm); err != nil {
		return requeueOnConflict(err)
	}
	res, err := s.apply(ctx, st)
	if err != nil {
		return requeueOnConflict(err)
	}
	if err := s.writeStatus(ctx, st, res); err != nil {
		return requeueOnConflict(err)
	}
	if !st.kvvmWaits {
		if err := s.observeRecord(ctx, st.record, res.RecordGeneration); err != nil {
			return requeueOnConflict(err)
		}
	}
	out := ctrl.Result{}
	if left := s.expect.left(req.NamespacedName, s.now()); left > 0 {
		out.RequeueAfter = left // look again when the expectations lapse: no event may come
	}
	if recheck := cmp.Or(s.RecheckSDN, SDNRecheck); st.kvvmWaits && (out.RequeueAfter == 0 || out.RequeueAfter > recheck) {
		out.RequeueAfter = recheck // SDN's answer wakes the VM; this is VC's recheck
	}
	return out, nil
}

// read reads the VM (as it is and typed), its record and its KVVM template.
func (s *Simulator) read(ctx context.Context, key types.NamespacedName) (*vmState, error) {
	raw, vm, err := s.getVM(ctx, key)
	if err != nil {
		return nil, err
	}
	vm.Status.Networks = ensureNetworks(vm)
	st := &vmState{raw: raw, vm: vm}
	rec := &ipamv1.VirtualMachineIPAM{}
	switch err := s.get(ctx, key, rec); {
	case err == nil:
		st.record = rec
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("getting the decision record of VM %s: %w", key, err)
	}
	st.template, err = s.readTemplate(ctx, key, vm.UID)
	return st, err
}

// getVM reads VM key as it is, with every field of the real CRD (status fields the stand-in
// does not know must survive its status Update), and typed.
func (s *Simulator) getVM(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, *virtv1.VirtualMachine, error) {
	raw := newUnstructured(vmKind)
	if err := s.get(ctx, key, raw); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("getting VM %s: %w", key, err)
	}
	vm := &virtv1.VirtualMachine{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw.Object, vm); err != nil {
		return nil, nil, fmt.Errorf("decoding VM %s: %w", key, err)
	}
	return raw, vm, nil
}

// apply applies the record (consumer.Apply): a launcher pod when the VM should run and has
// none (made from the template, written first: what its start gets), the live list on every
// running pod, with the VM's annotations, and then the template a launcher pod is made from —
// what runs while the VM runs, the next-boot list when it does not. The running pods come
// before the template as with VC, which patches the active pods first and updates the KVVM
// only once SDN has configured them (VC facts §2): while it has not (waitsForSDN), the template
// stays as it is and st.kvvmWaits is set; SDN's answer on a pod wakes the VM
// (launcherPodChanged), whose next reconcile writes the template.
func (s *Simulator) apply(ctx context.Context, st *vmState) (consumer.Result, error) {
	res := consumer.Apply(s.consumerInput(st))
	if shouldRun(st.vm) && len(st.pods) == 0 {
		if err := s.writeTemplate(ctx, st, res); err != nil {
			return res, err
		}
		pod, err := s.createLauncher(ctx, st.vm, st.template, nil)
		if err != nil {
			return res, err
		}
		st.pods = []corev1.Pod{*pod}
		res = consumer.Apply(s.consumerInput(st))
	}
	for _, pods := range [][]corev1.Pod{st.pods, st.others} {
		for i := range pods {
			if err := s.patchPod(ctx, st.vm, &pods[i], res); err != nil {
				return res, err
			}
		}
	}
	if waitsForSDN(st, res) {
		st.kvvmWaits = true
		return res, nil
	}
	return res, s.writeTemplate(ctx, st, res)
}

// waitsForSDN reports whether the KVVM template of a running VM must wait before it follows
// res.Live, as VC's does: its applyVMChangesToKVVM and applyNetworkReadinessSync
// (pkg/controller/vm/internal/sync_kvvm.go) patch the pods and update the KVVM only once
// isNetworkReadyOnPod, else they return errWaitForNetworkReady. It waits when the KVVM the VM
// controls holds another list than res.Live (or another decided mark) and some launcher pod
// the stand-in applies the record to — those the VM controls and the labelled ones no VM
// controls — is not sdnConfigured. A template that holds res.Live already has nothing to
// hold back. A missing KVVM is created at once, as VC's createKVVM does, and the template of
// a VM that does not run follows at once (VC's isVMStopped case).
//
// Simplification: with no live entry there is nothing SDN-managed to wait for, and the
// template follows at once. VC skips the wait so only for a running VM with Main alone whose
// KVVM has no active additional interface (applyNetworkReadinessSync); a change that removes
// a VM's last additional network (applyVMChangesToKVVM) still waits for every pod's
// networks-status to be present with every condition True — which SDN's stand-in, removing
// networks-status with networks-spec, never gives. Also VC checks every labelled pod not
// Succeeded, one being deleted too; the stand-in, whose pods never end (no kubelet), checks
// the ones not being deleted.
func waitsForSDN(st *vmState, res consumer.Result) bool {
	if len(st.pods) == 0 || len(res.Live) == 0 || !st.template.ownedBy(st.vm) || st.template.holds(res.Live, res.Decided) {
		return false
	}
	for _, pods := range [][]corev1.Pod{st.pods, st.others} {
		for i := range pods {
			if !sdnConfigured(res.Live, &pods[i]) {
				return true
			}
		}
	}
	return false
}

// consumerInput is what the stand-in knows of the VM for consumer.Apply: its additional NICs
// with their MACs, its record, what the oldest running pod carries, and the template's
// next-boot list.
func (s *Simulator) consumerInput(st *vmState) consumer.Input {
	in := consumer.Input{UID: st.vm.UID, Generation: st.vm.Generation, Record: st.record, Running: len(st.pods) > 0,
		NextBoot: st.template.entries, Decided: st.template.decided}
	nth := map[nicKey]int{}
	for _, n := range st.vm.Spec.Networks {
		k := nicKey{Type: n.Type, Name: n.Name}
		if n.Type != virtv1.NetworkTypeMain {
			in.Networks = append(in.Networks, consumer.Network{Type: string(n.Type), Name: n.Name, MAC: macOf(st.vm, k, nth[k])})
		}
		nth[k]++
	}
	if in.Running {
		pod := &st.pods[0]
		in.Applied, _ = sdnv1.ParseNetworksSpec(pod.Annotations[sdnv1.AnnotationNetworksSpec])
		in.Decided = consumer.Decided(pod.Annotations)
	}
	return in
}

// macOf is the MAC of the nth status.networks entry of network k.
func macOf(vm *virtv1.VirtualMachine, k nicKey, nth int) string {
	for _, n := range vm.Status.Networks {
		if n.Type == k.Type && n.Name == k.Name {
			if nth == 0 {
				return n.MACAddress
			}
			nth--
		}
	}
	return ""
}

// shouldRun reports whether vm's run policy, with the power state operations left on it, wants
// it running.
func shouldRun(vm *virtv1.VirtualMachine) bool {
	if vm.DeletionTimestamp != nil {
		return false
	}
	power := vm.Annotations[AnnotationPower]
	switch vm.Spec.RunPolicy {
	case virtv1.RunPolicyAlwaysOn:
		return true
	case virtv1.RunPolicyAlwaysOff:
		return false
	case virtv1.RunPolicyManual:
		return power == PowerOn
	default: // AlwaysOnUnlessStoppedManually, the default
		return power != PowerOff
	}
}

// converge makes vm's launcher pods match its run intent — none when it should not run, the
// ones it has when it should (apply starts one when there is none), two while a migration is
// under way — and returns them, oldest first, with the labelled pods no VM controls. Pods of an
// earlier VM of the same name are deleted.
func (s *Simulator) converge(ctx context.Context, vm *virtv1.VirtualMachine) (pods, others []corev1.Pod, err error) {
	pods, stale, others, err := s.observeAllPods(ctx, vm)
	if err != nil {
		return nil, nil, err
	}
	if err := s.deletePods(ctx, stale); err != nil {
		return nil, nil, err
	}
	switch {
	case !shouldRun(vm):
		return nil, others, s.deletePods(ctx, pods)
	case len(pods) > 1 && migrationTarget(pods) == nil:
		newest := len(pods) - 1
		return pods[newest:], others, s.deletePods(ctx, pods[:newest])
	}
	return pods, others, nil
}

// collect deletes the launcher pods and the KVVM of the deleted VM key, as the garbage
// collector would.
func (s *Simulator) collect(ctx context.Context, key types.NamespacedName) error {
	if err := s.collectPods(ctx, key); err != nil {
		return err
	}
	return s.deleteTemplate(ctx, key)
}
