package virtualization

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// ConditionCompleted is the condition the stand-in sets on a finished operation: True when it
// was carried out, False with a reason when it failed.
const ConditionCompleted = "Completed"

// Reasons of the Completed condition.
const (
	ReasonCompleted              = "Completed"
	ReasonVirtualMachineNotFound = "VirtualMachineNotFound"
	ReasonNotRunning             = "VirtualMachineNotRunning"
	ReasonUnsupported            = "UnsupportedOperation"
)

// startWait is how soon a Migrate of a VM that should run but has no pod yet is retried.
const startWait = 200 * time.Millisecond

// failure is why an operation failed.
type failure struct {
	reason, message string
}

// setupOperation registers vc-stand-in-operation.
func (s *Simulator) setupOperation(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("vc-stand-in-operation").
		For(&virtv1.VirtualMachineOperation{}, builder.WithPredicates(s.notOwnEcho())).
		Complete(reconcile.Func(s.ReconcileOperation))
}

// ReconcileOperation carries out the VirtualMachineOperation req names, once: Completed and
// Failed operations are left alone. A Migrate takes two reconciles, MigrationDuration apart.
// The VM's status is left to ReconcileVirtualMachine, which the pod changes trigger.
func (s *Simulator) ReconcileOperation(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	op := &virtv1.VirtualMachineOperation{}
	if err := s.get(ctx, req.NamespacedName, op); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	defer s.lockVM(types.NamespacedName{Namespace: op.Namespace, Name: op.Spec.VirtualMachineName})()
	if err := s.get(ctx, req.NamespacedName, op); err != nil { // fresh under the lock
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if op.Status.Phase == virtv1.OperationPhaseCompleted || op.Status.Phase == virtv1.OperationPhaseFailed {
		return ctrl.Result{}, nil
	}
	_, vm, err := s.getVM(ctx, client.ObjectKey{Namespace: op.Namespace, Name: op.Spec.VirtualMachineName})
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, s.finish(ctx, op, &failure{ReasonVirtualMachineNotFound,
			fmt.Sprintf("VirtualMachine %s not found", op.Spec.VirtualMachineName)})
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("operation %s: %w", req.NamespacedName, err)
	}
	if err := s.start(ctx, op); err != nil {
		return ctrl.Result{}, err
	}
	wait, fail, err := s.carryOut(ctx, op.Spec.Type, vm)
	switch {
	case err != nil:
		return requeueOnConflict(err)
	case wait > 0:
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return ctrl.Result{}, s.finish(ctx, op, fail)
}

// carryOut does (one step of) an operation of type t on vm. wait > 0 asks to come back later.
func (s *Simulator) carryOut(ctx context.Context, t virtv1.OperationType, vm *virtv1.VirtualMachine) (wait time.Duration, fail *failure, err error) {
	switch t {
	case virtv1.OperationStart:
		return 0, nil, s.power(ctx, vm, PowerOn, false)
	case virtv1.OperationStop:
		return 0, nil, s.power(ctx, vm, PowerOff, true)
	case virtv1.OperationRestart:
		return s.restart(ctx, vm)
	case virtv1.OperationMigrate:
		return s.migrate(ctx, vm)
	}
	return 0, &failure{ReasonUnsupported, fmt.Sprintf("operation type %q is not supported by the stand-in", t)}, nil
}

// power records the power state on vm and converges its pods to it; kill deletes the running
// pods first (so stopping an AlwaysOn VM restarts it, as on the platform). A VM to start gets
// its launcher pod from the reconcile the annotation's change brings.
func (s *Simulator) power(ctx context.Context, vm *virtv1.VirtualMachine, state string, kill bool) error {
	if err := s.setPower(ctx, vm, state); err != nil {
		return err
	}
	if kill {
		if err := s.killPods(ctx, vm); err != nil {
			return err
		}
	}
	_, _, err := s.converge(ctx, vm)
	return err
}

// restart deletes the launcher pods of a VM that should run; the VM's reconcile, which their
// deletion brings, starts a new one from the next-boot template (a start: held changes apply).
func (s *Simulator) restart(ctx context.Context, vm *virtv1.VirtualMachine) (time.Duration, *failure, error) {
	if !shouldRun(vm) {
		return 0, &failure{ReasonNotRunning, "VirtualMachine is stopped"}, nil
	}
	return 0, nil, s.killPods(ctx, vm)
}

// migrate moves a running VM to a new pod: the first step creates the target pod beside the
// source from the KVVM template — which, while the VM runs, holds what runs, not a change held
// until restart — (the VM is Migrating), the step MigrationDuration later deletes the source.
func (s *Simulator) migrate(ctx context.Context, vm *virtv1.VirtualMachine) (time.Duration, *failure, error) {
	pods, _, err := s.observePods(ctx, vm)
	if err != nil {
		return 0, nil, err
	}
	target := migrationTarget(pods)
	if target == nil {
		if len(pods) == 0 {
			if shouldRun(vm) {
				return startWait, nil, nil
			}
			return 0, &failure{ReasonNotRunning, "VirtualMachine is not running"}, nil
		}
		source := pods[len(pods)-1].Name
		tmpl, err := s.readTemplate(ctx, client.ObjectKeyFromObject(vm), vm.UID)
		if err != nil {
			return 0, nil, err
		}
		if target, err = s.createLauncher(ctx, vm, tmpl, map[string]string{
			AnnotationMigrationSource:  source,
			AnnotationMigrationStarted: s.now().Format(time.RFC3339Nano),
		}); err != nil {
			return 0, nil, err
		}
		s.wroteForTheVMController(target)
		pods = append(pods, *target)
	}
	if left := migrationLeft(target, s.MigrationDuration, s.now()); left > 0 {
		return left, nil, nil
	}
	name := target.Name
	return 0, nil, s.deletePods(ctx, slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.Name == name }))
}

// killPods deletes vm's launcher pods.
func (s *Simulator) killPods(ctx context.Context, vm *virtv1.VirtualMachine) error {
	pods, _, err := s.observePods(ctx, vm)
	if err != nil {
		return err
	}
	return s.deletePods(ctx, pods)
}

// setPower records state in vm's AnnotationPower, with a merge patch of that key only.
func (s *Simulator) setPower(ctx context.Context, vm *virtv1.VirtualMachine, state string) error {
	if vm.Annotations[AnnotationPower] == state {
		return nil
	}
	base := vm.DeepCopy()
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, AnnotationPower, state)
	if err := s.Client.Patch(ctx, vm, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("powering VM %s %s: %w", klog.KObj(vm), state, err)
	}
	s.wroteForTheVMController(vm)
	return nil
}

// start moves op to InProgress.
func (s *Simulator) start(ctx context.Context, op *virtv1.VirtualMachineOperation) error {
	if op.Status.Phase == virtv1.OperationPhaseInProgress {
		return nil
	}
	base := op.DeepCopy()
	op.Status.Phase = virtv1.OperationPhaseInProgress
	return s.patchOperation(ctx, op, base)
}

// finish moves op to Completed, or to Failed when fail is set, with the Completed condition.
func (s *Simulator) finish(ctx context.Context, op *virtv1.VirtualMachineOperation, fail *failure) error {
	base := op.DeepCopy()
	cond := metav1.Condition{Type: ConditionCompleted, Status: metav1.ConditionTrue, Reason: ReasonCompleted,
		Message: fmt.Sprintf("%s carried out (virtualization-controller stand-in)", op.Spec.Type), ObservedGeneration: op.Generation}
	op.Status.Phase = virtv1.OperationPhaseCompleted
	if fail != nil {
		op.Status.Phase = virtv1.OperationPhaseFailed
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, fail.reason, fail.message
	}
	meta.SetStatusCondition(&op.Status.Conditions, cond)
	return s.patchOperation(ctx, op, base)
}

// patchOperation writes op's status, changed from base.
func (s *Simulator) patchOperation(ctx context.Context, op, base *virtv1.VirtualMachineOperation) error {
	if err := s.Client.Status().Patch(ctx, op, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("writing status of operation %s: %w", klog.KObj(op), err)
	}
	s.wrote(op)
	return nil
}
