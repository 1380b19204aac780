package virtualization

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
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

// A launcher pod is made from the KVVM template, which a start builds from the record's
// next-boot list: the pod carries the decided interfaces and the decided mark.
func TestALauncherPodIsMadeFromTheRecord(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))))
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"))
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	if len(pods) != 1 {
		t.Fatalf("launcher pods = %v, want one", podNames(pods))
	}
	p := pods[0]
	if !strings.HasPrefix(p.Name, "virt-launcher-vm-") || len(p.Name) != len("virt-launcher-vm-")+5 {
		t.Errorf("pod name = %q, want virt-launcher-vm-xxxxx", p.Name)
	}
	if got := carried(t, &p); !slices.Equal(got, []string{"corp=corp-ip"}) || !consumer.Decided(p.Annotations) ||
		p.Annotations[consumer.AnnotationDecided] == "" || p.Annotations[AnnotationTapProvision] != "true" {
		t.Errorf("pod annotations = %v, want corp's Auto IPAddress, the decided mark and the tap flag", p.Annotations)
	}
	if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != "uid-vm" || ref.Kind != "VirtualMachine" {
		t.Errorf("pod controller = %+v, want VirtualMachine vm", ref)
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image != LauncherImage {
		t.Errorf("pod containers = %+v, want one of image %s", p.Spec.Containers, LauncherImage)
	}
	nics, _, _ := unstructured.NestedSlice(kvvm(t, s, "vm").Object, "spec", "template", "spec", "domain", "devices", "interfaces")
	if len(nics) != 1 || nics[0].(map[string]any)["binding"].(map[string]any)["name"] != bindingPlugin {
		t.Errorf("KVVM NICs = %v, want one bpfbridge NIC for corp", nics)
	}
}

// A VM that starts before any record exists gets neither interfaces nor the decided mark; the
// first record then applies live whatever hotplug says.
func TestAPodStartedBeforeAnyRecordTakesTheFirstAsItsConfiguration(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))))
	reconcileVM(t, s, "vm")
	pod := podsOf(t, s, "vm")[0]
	if _, ok := pod.Annotations[sdnv1.AnnotationNetworksSpec]; ok || consumer.Decided(pod.Annotations) {
		t.Fatalf("a pod started without a record carries %v", pod.Annotations)
	}
	if c := meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, consumer.ConditionNetworkReady); c == nil ||
		!strings.Contains(c.Message, consumer.ReasonDecisionPending) {
		t.Errorf("NetworkReady = %+v, want the interface pending its decision", c)
	}
	held := attached("corp", "10.0.0.5")
	held.Hotplug = false
	decide(t, s.Client, "vm", held)
	reconcileVM(t, s, "vm")
	pod = podsOf(t, s, "vm")[0]
	if got := carried(t, &pod); !slices.Equal(got, []string{"corp=corp-ip"}) || !consumer.Decided(pod.Annotations) {
		t.Errorf("pod after the first record = %v, want corp applied and the decided mark", pod.Annotations)
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

// A change held until restart stays off the running pod and off the template a migration target
// is made from; a deleted pod (a restart) is replaced by one made from the next-boot list.
func TestAHeldChangeWaitsForAStartNotAMigration(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))))
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"))
	reconcileVM(t, s, "vm")
	old := podsOf(t, s, "vm")[0]
	lan := attached("lan", "10.0.1.5")
	lan.Hotplug = false
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"), lan)
	reconcileVM(t, s, "vm")
	running := podsOf(t, s, "vm")[0]
	if got := carried(t, &running); !slices.Equal(got, []string{"corp=corp-ip"}) {
		t.Errorf("running pod carries %v, want lan held until restart", got)
	}
	if got := templateEntries(t, s, "vm"); !slices.Equal(got, []string{"corp=corp-ip"}) {
		t.Errorf("KVVM template %v, want what runs (a migration target is made from it)", got)
	}
	if c := meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, consumer.ConditionAwaitingRestart); c == nil ||
		!strings.Contains(c.Message, "ClusterNetwork/lan") {
		t.Errorf("AwaitingRestartToApplyConfiguration = %+v, want lan named", c)
	}
	if err := s.Client.Delete(context.Background(), &old); err != nil {
		t.Fatal(err)
	}
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	if len(pods) != 1 || pods[0].Name == old.Name {
		t.Fatalf("launcher pods = %v, want one new pod replacing %s", podNames(pods), old.Name)
	}
	if got := carried(t, &pods[0]); !slices.Equal(got, []string{"corp=corp-ip", "lan=lan-ip"}) {
		t.Errorf("the restarted pod carries %v, want the next-boot list with lan", got)
	}
	if c := meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, consumer.ConditionAwaitingRestart); c != nil {
		t.Errorf("AwaitingRestartToApplyConfiguration = %+v after the restart, want it gone", c)
	}
}

// VC copies every VM annotation onto its running pods, a networks-spec too, and removes what
// it copied once the VM no longer has it.
func TestVMAnnotationsAreCopiedOntoRunningPods(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp")), annotated("example.com/note", "a")))
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"))
	reconcileVM(t, s, "vm")
	reconcileVM(t, s, "vm")
	pod := podsOf(t, s, "vm")[0]
	if pod.Annotations["example.com/note"] != "a" {
		t.Errorf("pod annotations = %v, want the VM's copied", pod.Annotations)
	}
	vm := getVM(t, s, "vm")
	delete(vm.Annotations, "example.com/note")
	vm.Annotations[sdnv1.AnnotationNetworksSpec] = "[]"
	if err := s.Client.Update(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	reconcileVM(t, s, "vm")
	pod = podsOf(t, s, "vm")[0]
	if _, ok := pod.Annotations["example.com/note"]; ok || pod.Annotations[sdnv1.AnnotationNetworksSpec] != "[]" {
		t.Errorf("pod annotations = %v, want the note removed and the VM's networks-spec winning over the record's", pod.Annotations)
	}
}

func TestReconcileVirtualMachineDeletesPodsAndTemplateOfGoneVM(t *testing.T) {
	s, _ := newSim(t, newVM("vm"))
	reconcileVM(t, s, "vm")
	if err := s.Client.Delete(context.Background(), newVM("vm")); err != nil {
		t.Fatal(err)
	}
	reconcileVM(t, s, "vm")
	if pods := podsOf(t, s, "vm"); len(pods) != 0 {
		t.Errorf("launcher pods of a deleted VM = %v, want none", podNames(pods))
	}
	t.Run("its KVVM too", func(t *testing.T) {
		if tmpl, err := s.readTemplate(context.Background(), types.NamespacedName{Namespace: ns, Name: "vm"}, "uid-vm"); err != nil || tmpl.kvvm != nil {
			t.Errorf("KVVM of a deleted VM = %v (%v), want none", tmpl, err)
		}
	})
}

func TestReconcileVirtualMachineDeletesPodsOfEarlierVM(t *testing.T) {
	earlier := launcherPod(newVM("vm", func(vm *virtv1.VirtualMachine) { vm.UID = "uid-earlier" }), &template{}, nil)
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

// VC rebuilds status.networks whole: one entry per spec entry with its MAC, the address SDN
// configured while the VM runs and the record's while it does not; it keeps the conditions it
// does not build and writes nothing when nothing changed.
func TestReconcileVirtualMachineStatusNetworks(t *testing.T) {
	vm := newVM("vm", runPolicy(virtv1.RunPolicyAlwaysOff),
		networks(virtv1.NetworksSpec{Type: virtv1.NetworkTypeMain}, onCorp("corp")),
		withStatusNetworks(virtv1.NetworksStatus{Type: virtv1.NetworkTypeClusterNetwork, Name: "gone", IPAddress: "10.0.0.99"}),
		func(vm *virtv1.VirtualMachine) {
			vm.Status.Conditions = []metav1.Condition{{Type: "AgentReady", Status: metav1.ConditionTrue, Reason: "AgentReady", LastTransitionTime: metav1.Now()}}
		})
	s, _ := newSim(t, vm)
	decide(t, s.Client, "vm", attached("corp", "10.0.0.10"))
	reconcileVM(t, s, "vm")
	got := getVM(t, s, "vm")
	st := got.Status.Networks
	if len(st) != 2 || st[0].Type != virtv1.NetworkTypeMain || st[1].Name != "corp" || st[1].MACAddress == "" {
		t.Fatalf("status.networks = %+v, want Main and corp with MACs, the stale entry gone", st)
	}
	if st[1].IPAddress != "10.0.0.10" {
		t.Errorf("corp's ipAddress = %q while stopped, want the record's 10.0.0.10", st[1].IPAddress)
	}
	if meta.FindStatusCondition(got.Status.Conditions, "AgentReady") == nil ||
		meta.FindStatusCondition(got.Status.Conditions, consumer.ConditionNetworkReady) == nil {
		t.Errorf("conditions = %+v, want AgentReady kept and NetworkReady", got.Status.Conditions)
	}
	rv := got.ResourceVersion
	reconcileVM(t, s, "vm")
	if again := getVM(t, s, "vm"); again.ResourceVersion != rv {
		t.Errorf("unchanged status was written again: resourceVersion %s -> %s", rv, again.ResourceVersion)
	}
}

// TestTheStatusUpdateLosesAConcurrentWrite pins down that the whole-status Update goes under the
// resourceVersion read: a write in between makes it a conflict, retried, never a silent revert.
func TestTheStatusUpdateLosesAConcurrentWrite(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))))
	st, err := s.read(context.Background(), types.NamespacedName{Namespace: ns, Name: "vm"})
	if err != nil {
		t.Fatal(err)
	}
	other := getVM(t, s, "vm")
	other.Status.Conditions = []metav1.Condition{{Type: "AgentReady", Status: metav1.ConditionTrue, Reason: "AgentReady", LastTransitionTime: metav1.Now()}}
	if err := s.Client.Status().Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	err = s.writeStatus(context.Background(), st, consumer.Result{})
	if err == nil {
		t.Fatal("status Update from a stale read succeeded, want a conflict")
	}
	if res, err := requeueOnConflict(err); err != nil || res.RequeueAfter != conflictRetry {
		t.Errorf("requeueOnConflict() = %v, %v, want a retry after %v", res, err, conflictRetry)
	}
	if meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, "AgentReady") == nil {
		t.Error("the other writer's condition was reverted")
	}
}

func TestTheRecordsStatusSaysWhichGenerationIsApplied(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))))
	decide(t, s.Client, "vm", attached("corp", "10.0.0.5"))
	reconcileVM(t, s, "vm")
	rec := &ipamv1.VirtualMachineIPAM{}
	if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "vm"}, rec); err != nil {
		t.Fatal(err)
	}
	if rec.Status.ObservedGeneration != rec.Generation || rec.Generation == 0 {
		t.Errorf("record status.observedGeneration = %d, want its generation %d", rec.Status.ObservedGeneration, rec.Generation)
	}
}

// kvvm reads VM name's KVVM.
func kvvm(t *testing.T, s *Simulator, name string) *unstructured.Unstructured {
	t.Helper()
	tmpl, err := s.readTemplate(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, types.UID("uid-"+name))
	if err != nil || tmpl.kvvm == nil {
		t.Fatalf("KVVM of %s: %v, %v", name, tmpl, err)
	}
	return tmpl.kvvm
}

// templateEntries is what the KVVM template's networks-spec carries, as carried shows a pod's.
func templateEntries(t *testing.T, s *Simulator, name string) []string {
	t.Helper()
	annotations, _, _ := unstructured.NestedStringMap(kvvm(t, s, name).Object, "spec", "template", "metadata", "annotations")
	return carried(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}})
}

// runningWithCorp starts VM name with corp attached, SDN's answer on its pod, and returns the
// pod: the KVVM template holds corp and the record's first generation is observed.
func runningWithCorp(t *testing.T, s *Simulator, name string) corev1.Pod {
	t.Helper()
	decide(t, s.Client, name, attached("corp", "10.0.0.5"))
	reconcileVM(t, s, name)
	pod := podsOf(t, s, name)[0]
	answerSDN(t, s, &pod, configuredNIC("corp"))
	reconcileVM(t, s, name)
	if got := templateEntries(t, s, name); !slices.Equal(got, []string{"corp=corp-ip"}) || observed(t, s, name) != 1 {
		t.Fatalf("a running VM: template %v, observedGeneration %d; want corp, 1", got, observed(t, s, name))
	}
	return pod
}

// hotplugLan decides lan attached beside corp (the record's second generation), reconciles
// and returns what the reconcile asked for.
func hotplugLan(t *testing.T, s *Simulator, name string) ctrl.Result {
	t.Helper()
	decide(t, s.Client, name, attached("corp", "10.0.0.5"), attached("lan", "10.0.1.5"))
	return reconcileVM(t, s, name)
}

// wantKVVMWaiting checks that VM name's KVVM waits for SDN: its pods carry corp and lan, the
// template still holds corp alone, the record's second generation is not observed, the VM
// shows ConfigurationApplied=False as VC writes it and the reconcile asked to look again
// within SDNRecheck.
func wantKVVMWaiting(t *testing.T, s *Simulator, name string, res ctrl.Result) {
	t.Helper()
	for _, p := range podsOf(t, s, name) {
		if got := carried(t, &p); !slices.Equal(got, []string{"corp=corp-ip", "lan=lan-ip"}) {
			t.Errorf("pod %s carries %v, want corp and lan: the running pods are patched first", p.Name, got)
		}
	}
	if got := templateEntries(t, s, name); !slices.Equal(got, []string{"corp=corp-ip"}) {
		t.Errorf("KVVM template %v before SDN configured lan, want corp alone", got)
	}
	if got := observed(t, s, name); got != 1 {
		t.Errorf("record status.observedGeneration = %d before the KVVM follows, want 1", got)
	}
	vm := getVM(t, s, name)
	c := meta.FindStatusCondition(vm.Status.Conditions, ConditionConfigurationApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonConfigurationNotApplied ||
		c.Message != MessageWaitingForSDN || c.ObservedGeneration != vm.Generation {
		t.Errorf("ConfigurationApplied = %+v, want False, %s, %q", c, ReasonConfigurationNotApplied, MessageWaitingForSDN)
	}
	if res.RequeueAfter != SDNRecheck {
		t.Errorf("RequeueAfter = %v while waiting for SDN, want %v", res.RequeueAfter, SDNRecheck)
	}
}

// wantKVVMFollowing checks that VM name's KVVM holds corp and lan, the record's second
// generation is observed and ConfigurationApplied is gone.
func wantKVVMFollowing(t *testing.T, s *Simulator, name string, res ctrl.Result) {
	t.Helper()
	if got := templateEntries(t, s, name); !slices.Equal(got, []string{"corp=corp-ip", "lan=lan-ip"}) {
		t.Errorf("KVVM template %v once SDN configured lan, want corp and lan", got)
	}
	if got := observed(t, s, name); got != 2 {
		t.Errorf("record status.observedGeneration = %d once the KVVM follows, want 2", got)
	}
	if c := meta.FindStatusCondition(getVM(t, s, name).Status.Conditions, ConditionConfigurationApplied); c != nil {
		t.Errorf("ConfigurationApplied = %+v once the KVVM follows, want it removed", c)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("RequeueAfter = %v once the KVVM follows, want none", res.RequeueAfter)
	}
}

// A hotplug on a running VM goes as with VC (VC facts §2): the running pod is patched, the
// KVVM template — what a migration target is made from — waits until SDN reports the new
// interface in the pod's networks-status, and only then does the record's generation count
// as applied.
func TestAHotplugUpdatesTheKVVMOnlyOnceSDNHasConfiguredThePod(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"), onCorp("lan"))))
	pod := runningWithCorp(t, s, "vm")

	res := hotplugLan(t, s, "vm")
	wantKVVMWaiting(t, s, "vm", res)
	rv := getVM(t, s, "vm").ResourceVersion
	res = reconcileVM(t, s, "vm") // VC's recheck: SDN has not answered yet
	wantKVVMWaiting(t, s, "vm", res)
	if again := getVM(t, s, "vm").ResourceVersion; again != rv {
		t.Errorf("the recheck wrote the unchanged status again: resourceVersion %s -> %s", rv, again)
	}

	answerSDN(t, s, &pod, configuredNIC("corp"), configuredNIC("lan"))
	wantKVVMFollowing(t, s, "vm", reconcileVM(t, s, "vm")) // SDN's answer wakes the VM
}

// VC updates the KVVM only when every launcher pod's networks-status is there, reports every
// interface it is to carry, and every interface's conditions are True — one interface SDN
// failed to configure, even one that ran before, holds the KVVM.
func TestTheKVVMWaitsWhileSDNHasNotConfiguredEveryInterface(t *testing.T) {
	lanDown := configuredNIC("lan")
	lanDown.Conditions[0] = sdnv1.NICCondition{Type: sdnv1.NICConditionConfigured, Status: "False", Reason: "ConfigurationError",
		Message: "link veth_lan not found"}
	corpNoCarrier := configuredNIC("corp")
	corpNoCarrier.Conditions[1] = sdnv1.NICCondition{Type: sdnv1.NICConditionNegotiated, Status: "False", Reason: "NoCarrier"}
	tests := []struct {
		name           string
		networksStatus string // "": none
		item           string // in NetworkReady's message
	}{
		{name: "the new interface's Configured condition is False", networksStatus: nicsJSON(t, configuredNIC("corp"), lanDown),
			item: "ClusterNetwork/lan: WaitingForSDN: SDN reports it not configured: Configured=False (ConfigurationError)"},
		{name: "an interface that ran before has lost its carrier", networksStatus: nicsJSON(t, corpNoCarrier, configuredNIC("lan")),
			item: "ClusterNetwork/corp: WaitingForSDN: SDN reports it not configured: Negotiated=False (NoCarrier)"},
		{name: "the new interface is not reported", networksStatus: nicsJSON(t, configuredNIC("corp")),
			item: "ClusterNetwork/lan: WaitingForSDN: waiting for SDN to report status"},
		{name: "networks-status is gone",
			item: "ClusterNetwork/lan: WaitingForSDN: waiting for SDN to report status"},
		{name: "networks-status is unreadable", networksStatus: "{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(t, newVM("vm", networks(onCorp("corp"), onCorp("lan"))))
			pod := runningWithCorp(t, s, "vm")
			hotplugLan(t, s, "vm")
			answerSDNRaw(t, s, &pod, tt.networksStatus)
			wantKVVMWaiting(t, s, "vm", reconcileVM(t, s, "vm"))
			if c := meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, consumer.ConditionNetworkReady); tt.item != "" &&
				(c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, tt.item)) {
				t.Errorf("NetworkReady = %+v, want False with %q", c, tt.item)
			}
			answerSDN(t, s, &pod, configuredNIC("corp"), configuredNIC("lan"))
			wantKVVMFollowing(t, s, "vm", reconcileVM(t, s, "vm"))
		})
	}
}

// During a migration VC patches both pods and waits for SDN on both: the target, which SDN
// configures apart on its own node, holds the KVVM as long as the source would.
func TestAHotplugDuringAMigrationWaitsForSDNOnBothPods(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"), onCorp("lan"))), newOp("op", virtv1.OperationMigrate, "vm"))
	s.MigrationDuration = time.Minute
	source := runningWithCorp(t, s, "vm")
	reconcileOp(t, s, "op")
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	target := migrationTarget(pods)
	if len(pods) != 2 || target == nil {
		t.Fatalf("launcher pods = %v, want a migration under way", podNames(pods))
	}
	answerSDN(t, s, target, configuredNIC("corp"))
	reconcileVM(t, s, "vm")

	hotplugLan(t, s, "vm")
	answerSDN(t, s, &source, configuredNIC("corp"), configuredNIC("lan"))
	wantKVVMWaiting(t, s, "vm", reconcileVM(t, s, "vm"))
	answerSDN(t, s, target, configuredNIC("corp"), configuredNIC("lan"))
	wantKVVMFollowing(t, s, "vm", reconcileVM(t, s, "vm"))
}

// With no additional interface left to run there is nothing SDN-managed to wait for (the
// stand-in's simplification of VC's Main-only skip, waitsForSDN): the KVVM follows at once.
func TestRemovingTheLastInterfaceUpdatesTheKVVMAtOnce(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"))))
	runningWithCorp(t, s, "vm")
	gone := attached("corp", "10.0.0.5")
	gone.Attach = false
	decide(t, s.Client, "vm", gone)
	res := reconcileVM(t, s, "vm")
	if got := carried(t, &podsOf(t, s, "vm")[0]); len(got) != 0 {
		t.Errorf("pod carries %v, want nothing", got)
	}
	if got := templateEntries(t, s, "vm"); len(got) != 0 || observed(t, s, "vm") != 2 || res.RequeueAfter != 0 {
		t.Errorf("KVVM template %v, observedGeneration %d, RequeueAfter %v; want empty, 2, none",
			got, observed(t, s, "vm"), res.RequeueAfter)
	}
	if c := meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, ConditionConfigurationApplied); c != nil {
		t.Errorf("ConfigurationApplied = %+v, want none", c)
	}
}
