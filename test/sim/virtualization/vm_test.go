package virtualization

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

func TestReconcileVirtualMachineRunPolicy(t *testing.T) {
	tests := []struct {
		name      string
		opts      []vmOpt
		wantPods  int
		wantPhase virtv1.Phase
	}{
		{name: "empty run policy means AlwaysOnUnlessStoppedManually and runs", wantPods: 1, wantPhase: virtv1.PhaseRunning},
		{name: "AlwaysOn runs", opts: []vmOpt{runPolicy(virtv1.RunPolicyAlwaysOn)}, wantPods: 1, wantPhase: virtv1.PhaseRunning},
		{name: "AlwaysOn runs even when powered off", opts: []vmOpt{runPolicy(virtv1.RunPolicyAlwaysOn), annotated(AnnotationPower, PowerOff)}, wantPods: 1, wantPhase: virtv1.PhaseRunning},
		{name: "AlwaysOff stays stopped", opts: []vmOpt{runPolicy(virtv1.RunPolicyAlwaysOff)}, wantPhase: virtv1.PhaseStopped},
		{name: "Manual stays stopped until started", opts: []vmOpt{runPolicy(virtv1.RunPolicyManual)}, wantPhase: virtv1.PhaseStopped},
		{name: "Manual runs once started", opts: []vmOpt{runPolicy(virtv1.RunPolicyManual), annotated(AnnotationPower, PowerOn)}, wantPods: 1, wantPhase: virtv1.PhaseRunning},
		{name: "AlwaysOnUnlessStoppedManually stays stopped once stopped", opts: []vmOpt{runPolicy(virtv1.RunPolicyAlwaysOnUnlessStoppedManually), annotated(AnnotationPower, PowerOff)}, wantPhase: virtv1.PhaseStopped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(t, newVM("vm", tt.opts...))
			reconcileVM(t, s, "vm")
			reconcileVM(t, s, "vm") // a second pass changes nothing
			if pods := podsOf(t, s, "vm"); len(pods) != tt.wantPods {
				t.Errorf("launcher pods = %v, want %d", podNames(pods), tt.wantPods)
			}
			if got := getVM(t, s, "vm").Status.Phase; got != tt.wantPhase {
				t.Errorf("phase = %s, want %s", got, tt.wantPhase)
			}
		})
	}
}

func TestReconcileVirtualMachineCreatesLauncherPod(t *testing.T) {
	s, _ := newSim(t, newVM("vm", annotated(sdnv1.AnnotationNetworksSpec, specOf("corp"))))
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	if len(pods) != 1 {
		t.Fatalf("launcher pods = %v, want one", podNames(pods))
	}
	p := pods[0]
	if !strings.HasPrefix(p.Name, "virt-launcher-vm-") || len(p.Name) != len("virt-launcher-vm-")+5 {
		t.Errorf("pod name = %q, want virt-launcher-vm-xxxxx", p.Name)
	}
	if got := p.Annotations[sdnv1.AnnotationNetworksSpec]; got != specOf("corp") {
		t.Errorf("pod networks-spec = %q, want the VM's %q", got, specOf("corp"))
	}
	if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != "uid-vm" || ref.Kind != "VirtualMachine" {
		t.Errorf("pod controller = %+v, want VirtualMachine vm", ref)
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != LauncherImage {
		t.Errorf("pod containers = %+v, want one of image %s", p.Spec.Containers, LauncherImage)
	}
}

func TestGenerateName(t *testing.T) {
	tests := []struct {
		name, vm, want string
	}{
		{name: "short VM name is kept whole", vm: "web", want: "virt-launcher-web-"},
		{name: "long VM name is cut to leave room for the random suffix", vm: strings.Repeat("a", 60), want: "virt-launcher-" + strings.Repeat("a", 44)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := generateName(tt.vm)
			if got != tt.want {
				t.Errorf("generateName(%q) = %q, want %q", tt.vm, got, tt.want)
			}
			if errs := validation.IsDNS1123Subdomain(got + "abcde"); len(errs) > 0 {
				t.Errorf("generated names are invalid: %v", errs)
			}
		})
	}
}

func TestReconcileVirtualMachineRecreatesDeletedPod(t *testing.T) {
	s, _ := newSim(t, newVM("vm", annotated(sdnv1.AnnotationNetworksSpec, specOf("corp"))))
	reconcileVM(t, s, "vm")
	old := podsOf(t, s, "vm")[0]
	if err := s.Client.Delete(context.Background(), &old); err != nil {
		t.Fatal(err)
	}
	setVMSpec(t, s, "vm", specOf("lab"))
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	if len(pods) != 1 || pods[0].Name == old.Name {
		t.Fatalf("launcher pods = %v, want one new pod replacing %s", podNames(pods), old.Name)
	}
	if got := pods[0].Annotations[sdnv1.AnnotationNetworksSpec]; got != specOf("lab") {
		t.Errorf("new pod networks-spec = %q, want the VM's current %q", got, specOf("lab"))
	}
}

func TestReconcileVirtualMachineDeletesPodsOfGoneVM(t *testing.T) {
	s, _ := newSim(t, newVM("vm"))
	reconcileVM(t, s, "vm")
	if err := s.Client.Delete(context.Background(), newVM("vm")); err != nil {
		t.Fatal(err)
	}
	reconcileVM(t, s, "vm")
	if pods := podsOf(t, s, "vm"); len(pods) != 0 {
		t.Errorf("launcher pods of a deleted VM = %v, want none", podNames(pods))
	}
}

func TestReconcileVirtualMachineDeletesPodsOfEarlierVM(t *testing.T) {
	earlier := launcherPod(newVM("vm", func(vm *virtv1.VirtualMachine) { vm.UID = "uid-earlier" }), nil)
	earlier.Name = "virt-launcher-vm-old00"
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare",
		Labels: map[string]string{virtv1.LabelLauncherVMName: "vm"}}}
	s, _ := newSim(t, newVM("vm"), earlier, bare)
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	names := podNames(pods)
	if len(pods) != 2 || !slices.Contains(names, "bare") || slices.Contains(names, earlier.Name) {
		t.Errorf("pods = %v, want the bare pod (not ours) and one new launcher, without %s", names, earlier.Name)
	}
}

func TestReconcileVirtualMachineStatusNetworks(t *testing.T) {
	vm := newVM("vm",
		networks(virtv1.NetworksSpec{Type: virtv1.NetworkTypeMain}, virtv1.NetworksSpec{Type: virtv1.NetworkTypeClusterNetwork, Name: "corp"}),
		withStatusNetworks(virtv1.NetworksStatus{Type: virtv1.NetworkTypeClusterNetwork, Name: "corp", IPAddress: "10.0.0.10"}),
		func(vm *virtv1.VirtualMachine) {
			vm.Status.Conditions = []metav1.Condition{{Type: "NetworkReady", Status: metav1.ConditionTrue, Reason: "NetworkReady", LastTransitionTime: metav1.Now()}}
		})
	s, _ := newSim(t, vm)
	reconcileVM(t, s, "vm")
	got := getVM(t, s, "vm")
	st := got.Status.Networks
	if len(st) != 2 {
		t.Fatalf("status.networks = %+v, want corp and Main", st)
	}
	if st[0].Name != "corp" || st[0].IPAddress != "10.0.0.10" || st[0].MACAddress == "" {
		t.Errorf("corp entry = %+v, want its ipAddress kept and a macAddress added", st[0])
	}
	if st[1].Type != virtv1.NetworkTypeMain || st[1].MACAddress == "" {
		t.Errorf("Main entry = %+v, want it appended with a macAddress", st[1])
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "NetworkReady" {
		t.Errorf("conditions = %+v, want NetworkReady kept", got.Status.Conditions)
	}

	rv := got.ResourceVersion
	reconcileVM(t, s, "vm")
	if again := getVM(t, s, "vm"); again.ResourceVersion != rv {
		t.Errorf("unchanged status was patched again: resourceVersion %s -> %s", rv, again.ResourceVersion)
	}
}

// TestReconcileVirtualMachineStatusOptimisticLock pins down that the status patch is refused
// when the VM changed since it was read, so the stand-in cannot overwrite vmipam's ipAddress.
func TestReconcileVirtualMachineStatusOptimisticLock(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(virtv1.NetworksSpec{Type: virtv1.NetworkTypeClusterNetwork, Name: "corp"})))
	stale := getVM(t, s, "vm")
	vmipam := stale.DeepCopy()
	vmipam.Status.Networks = []virtv1.NetworksStatus{{Type: virtv1.NetworkTypeClusterNetwork, Name: "corp", IPAddress: "10.0.0.10"}}
	if err := s.Client.Status().Update(context.Background(), vmipam); err != nil {
		t.Fatal(err)
	}
	err := s.writeStatus(context.Background(), stale, virtv1.PhaseRunning)
	if err == nil {
		t.Fatal("status patch from a stale VM succeeded, want a conflict")
	}
	if res, err := requeueOnConflict(err); err != nil || res.RequeueAfter != conflictRetry {
		t.Errorf("requeueOnConflict() = %v, %v, want a retry after %v", res, err, conflictRetry)
	}
	if got := getVM(t, s, "vm").Status.Networks; len(got) != 1 || got[0].IPAddress != "10.0.0.10" {
		t.Errorf("status.networks = %+v, want vmipam's ipAddress intact", got)
	}
}
