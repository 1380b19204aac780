package virtualization

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// newOp is operation ns/name of type t on VM vm.
func newOp(name string, t virtv1.OperationType, vm string) *virtv1.VirtualMachineOperation {
	return &virtv1.VirtualMachineOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       virtv1.VirtualMachineOperationSpec{Type: t, VirtualMachineName: vm},
	}
}

// reconcileOp runs ReconcileOperation on ns/name and returns the operation afterwards.
func reconcileOp(t *testing.T, s *Simulator, name string) (ctrl.Result, *virtv1.VirtualMachineOperation) {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	res, err := s.ReconcileOperation(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("ReconcileOperation(%s): %v", name, err)
	}
	op := &virtv1.VirtualMachineOperation{}
	if err := s.Client.Get(context.Background(), key, op); err != nil {
		t.Fatal(err)
	}
	return res, op
}

func TestReconcileOperationPower(t *testing.T) {
	tests := []struct {
		name      string
		vm        *virtv1.VirtualMachine
		op        virtv1.OperationType
		wantPods  int
		wantPhase virtv1.Phase
	}{
		{name: "Start runs a Manual VM", vm: newVM("vm", runPolicy(virtv1.RunPolicyManual)), op: virtv1.OperationStart, wantPods: 1, wantPhase: virtv1.PhaseRunning},
		{name: "Stop stops an AlwaysOnUnlessStoppedManually VM for good", vm: newVM("vm"), op: virtv1.OperationStop, wantPhase: virtv1.PhaseStopped},
		{name: "Stop restarts an AlwaysOn VM", vm: newVM("vm", runPolicy(virtv1.RunPolicyAlwaysOn)), op: virtv1.OperationStop, wantPods: 1, wantPhase: virtv1.PhaseRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(t, tt.vm, newOp("op", tt.op, "vm"))
			reconcileVM(t, s, "vm")
			_, op := reconcileOp(t, s, "op")
			reconcileVM(t, s, "vm")
			reconcileVM(t, s, "vm")
			if op.Status.Phase != virtv1.OperationPhaseCompleted {
				t.Errorf("operation phase = %s, want Completed", op.Status.Phase)
			}
			if pods := podsOf(t, s, "vm"); len(pods) != tt.wantPods {
				t.Errorf("launcher pods = %v, want %d", podNames(pods), tt.wantPods)
			}
			if got := getVM(t, s, "vm").Status.Phase; got != tt.wantPhase {
				t.Errorf("VM phase = %s, want %s", got, tt.wantPhase)
			}
		})
	}
}

func TestReconcileOperationRestartCreatesNewPod(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))), newOp("op", virtv1.OperationRestart, "vm"))
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"))
	reconcileVM(t, s, "vm")
	old := podsOf(t, s, "vm")[0].Name
	held := attached("lab", "10.0.1.5")
	held.Hotplug = false
	decide(t, s.Client, "vm", held)
	reconcileVM(t, s, "vm")
	_, op := reconcileOp(t, s, "op")
	reconcileVM(t, s, "vm") // the pod's deletion brings the VM back
	pods := podsOf(t, s, "vm")
	if len(pods) != 1 || pods[0].Name == old {
		t.Fatalf("launcher pods after restart = %v, want one pod other than %s", podNames(pods), old)
	}
	if got := carried(t, &pods[0]); !slices.Equal(got, []string{"lab=lab-ip"}) {
		t.Errorf("new pod carries %v, want the record's next-boot list", got)
	}
	if op.Status.Phase != virtv1.OperationPhaseCompleted {
		t.Errorf("operation phase = %s, want Completed", op.Status.Phase)
	}
}

func TestReconcileOperationMigrate(t *testing.T) {
	s, clk := newSim(t, newVM("vm", networks(onCorp("corp"))), newOp("op", virtv1.OperationMigrate, "vm"))
	s.MigrationDuration = 10 * time.Second
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"))
	reconcileVM(t, s, "vm")
	source := podsOf(t, s, "vm")[0].Name
	held := attached("lab", "10.0.1.5")
	held.Hotplug = false
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"), held)
	reconcileVM(t, s, "vm")

	res, op := reconcileOp(t, s, "op")
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	if len(pods) != 2 || op.Status.Phase != virtv1.OperationPhaseInProgress || res.RequeueAfter != 10*time.Second {
		t.Fatalf("mid-migration: pods %v, operation %s, requeue %v; want source and target, InProgress, 10s",
			podNames(pods), op.Status.Phase, res.RequeueAfter)
	}
	if got := getVM(t, s, "vm").Status.Phase; got != virtv1.PhaseMigrating {
		t.Errorf("mid-migration VM phase = %s, want Migrating", got)
	}
	target := migrationTarget(pods)
	if target == nil {
		t.Fatalf("pods = %v, want a migration target", podNames(pods))
	}
	if got := carried(t, target); !slices.Equal(got, []string{"corp=corp-ip"}) {
		t.Fatalf("target pod carries %v, want what the source carries, not the change held until restart", got)
	}

	clk.SetTime(clk.Now().Add(10 * time.Second))
	_, op = reconcileOp(t, s, "op")
	reconcileVM(t, s, "vm")
	pods = podsOf(t, s, "vm")
	if len(pods) != 1 || pods[0].Name != target.Name || pods[0].Name == source {
		t.Errorf("after migration pods = %v, want only the target %s", podNames(pods), target.Name)
	}
	if op.Status.Phase != virtv1.OperationPhaseCompleted {
		t.Errorf("operation phase = %s, want Completed", op.Status.Phase)
	}
	if got := getVM(t, s, "vm").Status.Phase; got != virtv1.PhaseRunning {
		t.Errorf("VM phase = %s, want Running", got)
	}
}

func TestReconcileOperationFailures(t *testing.T) {
	tests := []struct {
		name       string
		vm         *virtv1.VirtualMachine
		op         virtv1.OperationType
		wantReason string
	}{
		{name: "operation on a missing VM fails", op: virtv1.OperationStart, wantReason: ReasonVirtualMachineNotFound},
		{name: "migrating a stopped VM fails", vm: newVM("vm", runPolicy(virtv1.RunPolicyAlwaysOff)), op: virtv1.OperationMigrate, wantReason: ReasonNotRunning},
		{name: "restarting a stopped VM fails", vm: newVM("vm", runPolicy(virtv1.RunPolicyManual)), op: virtv1.OperationRestart, wantReason: ReasonNotRunning},
		{name: "unsupported operation type fails", vm: newVM("vm"), op: "Evict", wantReason: ReasonUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(t, newOp("op", tt.op, "vm"))
			if tt.vm != nil {
				if err := s.Client.Create(context.Background(), tt.vm); err != nil {
					t.Fatal(err)
				}
			}
			_, op := reconcileOp(t, s, "op")
			c := meta.FindStatusCondition(op.Status.Conditions, ConditionCompleted)
			if op.Status.Phase != virtv1.OperationPhaseFailed || c == nil || c.Status != metav1.ConditionFalse || c.Reason != tt.wantReason || c.Message == "" {
				t.Errorf("operation = %s %+v, want Failed with Completed=False/%s and a message", op.Status.Phase, c, tt.wantReason)
			}
		})
	}
}

func TestReconcileOperationRunsOnce(t *testing.T) {
	done := newOp("op", virtv1.OperationRestart, "vm")
	done.Status.Phase = virtv1.OperationPhaseCompleted
	s, _ := newSim(t, newVM("vm"), done)
	reconcileVM(t, s, "vm")
	before := podsOf(t, s, "vm")[0].Name
	reconcileOp(t, s, "op")
	if pods := podsOf(t, s, "vm"); len(pods) != 1 || pods[0].Name != before {
		t.Errorf("a Completed Restart ran again: pods %v, want %s", podNames(pods), before)
	}
}
