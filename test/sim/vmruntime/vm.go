package vmruntime

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// setupVM registers vmruntime-sim-vm: VMs and the launcher pods they control.
func (s *Simulator) setupVM(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("vmruntime-sim-vm").
		For(&virtv1.VirtualMachine{}).
		Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: Workers}).
		Complete(reconcile.Func(s.ReconcileVirtualMachine))
}

// ReconcileVirtualMachine converges the launcher pods of the VM req names to its run intent and
// writes its status.phase and status.networks. A VM that is gone loses its pods.
func (s *Simulator) ReconcileVirtualMachine(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer s.lockVM(req.NamespacedName)()
	vm := &virtv1.VirtualMachine{}
	if err := s.reader().Get(ctx, req.NamespacedName, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, s.collectPods(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, fmt.Errorf("getting VM %s: %w", req.NamespacedName, err)
	}
	pods, err := s.converge(ctx, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if s.ReportGuest {
		setRunning(vm, pods)
	}
	res, err := requeueOnConflict(s.writeStatus(ctx, vm, phaseOf(shouldRun(vm), pods)))
	if left := s.expect.left(req.NamespacedName, s.now()); err == nil && res.RequeueAfter == 0 && left > 0 {
		res.RequeueAfter = left // look again when the expectations lapse: no event may come
	}
	return res, err
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

// converge makes vm's launcher pods match its run intent — none when it should not run, one
// when it should, two while a migration is under way — and returns them, oldest first. Pods of
// an earlier VM of the same name are deleted.
func (s *Simulator) converge(ctx context.Context, vm *virtv1.VirtualMachine) ([]corev1.Pod, error) {
	pods, stale, err := s.observePods(ctx, vm)
	if err != nil {
		return nil, err
	}
	if err := s.deletePods(ctx, stale); err != nil {
		return nil, err
	}
	switch {
	case !shouldRun(vm):
		return nil, s.deletePods(ctx, pods)
	case len(pods) == 0:
		pod, err := s.createLauncher(ctx, vm, nil)
		if err != nil {
			return nil, err
		}
		return []corev1.Pod{*pod}, nil
	case len(pods) > 1 && migrationTarget(pods) == nil:
		newest := len(pods) - 1
		return pods[newest:], s.deletePods(ctx, pods[:newest])
	}
	return pods, nil
}

// phaseOf is the phase of a VM that should (not) run and has pods.
func phaseOf(run bool, pods []corev1.Pod) virtv1.Phase {
	switch {
	case len(pods) > 1 && migrationTarget(pods) != nil:
		return virtv1.PhaseMigrating
	case len(pods) > 0:
		return virtv1.PhaseRunning
	case run:
		return virtv1.PhaseStarting
	default:
		return virtv1.PhaseStopped
	}
}

// ConditionRunning is the condition the stand-in writes in ReportGuest mode, as the
// virtualization controller reports its guest: True while a launcher pod runs, its message
// naming the pod and how many NICs SDN has configured on it (from networks-status).
const ConditionRunning = "Running"

// setRunning sets ConditionRunning on vm from its launcher pods (oldest first). It changes
// whenever SDN answers a pod's networks-spec — the moment vmipam writes the VM's status too.
func setRunning(vm *virtv1.VirtualMachine, pods []corev1.Pod) {
	c := metav1.Condition{Type: ConditionRunning, Status: metav1.ConditionFalse, Reason: "NoLauncherPod",
		Message: "no launcher pod runs", ObservedGeneration: vm.Generation}
	if len(pods) > 0 {
		pod := pods[len(pods)-1]
		var nics []sdnv1.NetworksStatusEntry
		_ = json.Unmarshal([]byte(pod.Annotations[sdnv1.AnnotationNetworksStatus]), &nics) // absent or unreadable: none
		c.Status, c.Reason = metav1.ConditionTrue, "LauncherPodRunning"
		c.Message = fmt.Sprintf("launcher pod %s runs with %d additional NICs configured", pod.Name, len(nics))
	}
	meta.SetStatusCondition(&vm.Status.Conditions, c)
}

// writeStatus sets vm's status.phase and the entries of status.networks the stand-in owns, and
// patches them when they changed: a JSON merge patch of those fields only, with optimistic
// locking, so fields other writers own (ipAddress, conditions, …) stay as they are. When the VM
// starts running, the same patch reports its guest in status.guestOSInfo, a field of the real
// CRD that vmipam's Go types do not know (and must not drop).
func (s *Simulator) writeStatus(ctx context.Context, vm *virtv1.VirtualMachine, phase virtv1.Phase) error {
	base := vm.DeepCopy()
	vm.Status.Phase = phase
	vm.Status.Networks = ensureNetworks(vm)
	if equality.Semantic.DeepEqual(base.Status, vm.Status) {
		return nil
	}
	var patch client.Patch = client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if phase == virtv1.PhaseRunning && base.Status.Phase != phase {
		patch = withGuestOSInfo{patch}
	}
	if err := s.Client.Status().Patch(ctx, vm, patch); err != nil {
		return fmt.Errorf("writing status of VM %s: %w", klog.KObj(vm), err)
	}
	return nil
}

// StatusGuestOSInfo is the status field (of the real CRD, unknown to vmipam's Go types) in
// which the stand-in reports a running VM's guest, GuestOSInfo.
const StatusGuestOSInfo = "guestOSInfo"

// GuestOSInfo is what the stand-in reports in status.guestOSInfo.
var GuestOSInfo = map[string]any{"name": "Stand-in Linux", "kernelRelease": "6.12.0-vmipam"}

// withGuestOSInfo adds status.guestOSInfo = GuestOSInfo to a status merge patch.
type withGuestOSInfo struct{ client.Patch }

// Data implements client.Patch.
func (p withGuestOSInfo) Data(obj client.Object) ([]byte, error) {
	data, err := p.Patch.Data(obj)
	if err != nil {
		return nil, err
	}
	var patch map[string]any
	if err := json.Unmarshal(data, &patch); err != nil {
		return nil, err
	}
	status, _ := patch["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	status[StatusGuestOSInfo] = GuestOSInfo
	patch["status"] = status
	return json.Marshal(patch)
}
