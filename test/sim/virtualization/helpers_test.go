package virtualization

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

const ns = "default"

// newSim returns a simulator on a fake client holding objs, with a fake clock and a
// MigrationDuration of 0.
func newSim(t *testing.T, objs ...client.Object) (*Simulator, *clocktesting.FakePassiveClock) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, virtv1.AddToScheme, ipamv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&virtv1.VirtualMachine{}, &virtv1.VirtualMachineOperation{}, &ipamv1.VirtualMachineIPAM{}).
		WithIndex(&corev1.Pod{}, indexVMName, vmNameOf).Build()
	s := New(c)
	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s.Clock, s.MigrationDuration = clk, 0
	return s, clk
}

// vmOpt changes a VM under construction.
type vmOpt func(*virtv1.VirtualMachine)

// runPolicy sets spec.runPolicy.
func runPolicy(p virtv1.RunPolicy) vmOpt {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.RunPolicy = p }
}

// annotated sets an annotation.
func annotated(k, v string) vmOpt {
	return func(vm *virtv1.VirtualMachine) { metav1.SetMetaDataAnnotation(&vm.ObjectMeta, k, v) }
}

// networks sets spec.networks.
func networks(n ...virtv1.NetworksSpec) vmOpt {
	return func(vm *virtv1.VirtualMachine) { vm.Spec.Networks = n }
}

// withStatusNetworks sets status.networks.
func withStatusNetworks(n ...virtv1.NetworksStatus) vmOpt {
	return func(vm *virtv1.VirtualMachine) { vm.Status.Networks = n }
}

// newVM is VM ns/name with uid "uid-<name>".
func newVM(name string, opts ...vmOpt) *virtv1.VirtualMachine {
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

// onCorp is an additional interface on ClusterNetwork name.
func onCorp(name string) virtv1.NetworksSpec {
	return virtv1.NetworksSpec{Type: virtv1.NetworkTypeClusterNetwork, Name: name}
}

// attached is vmipam's decision to attach ClusterNetwork name with its Auto IPAddress
// name+"-ip" at address, live changes allowed.
func attached(name, address string) ipamv1.InterfaceDecision {
	return ipamv1.InterfaceDecision{Type: "ClusterNetwork", Name: name, Allocation: ipamv1.AllocationAuto,
		IPAddressName: name + "-ip", Address: address, Attach: true, Hotplug: true}
}

// decide writes VM name's decision record with the decisions through c, for the VM's current
// UID and generation (creating it, or replacing its spec), as vmipam does.
func decide(t *testing.T, c client.Client, name string, ds ...ipamv1.InterfaceDecision) {
	t.Helper()
	vm := &virtv1.VirtualMachine{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	rec := &ipamv1.VirtualMachineIPAM{}
	err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, rec)
	rec.Spec = ipamv1.VirtualMachineIPAMSpec{VMUID: vm.UID, VMGeneration: vm.Generation, Interfaces: ds}
	rec.Generation++ // as the API server counts spec changes; the fake client does not
	switch {
	case err == nil:
		err = c.Update(context.Background(), rec)
	default:
		rec.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1}
		err = c.Create(context.Background(), rec)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// carried is what the pod's networks-spec carries: "<network>=<IPAddress>" per entry.
func carried(t *testing.T, pod *corev1.Pod) []string {
	t.Helper()
	entries, err := sdnv1.ParseNetworksSpec(pod.Annotations[sdnv1.AnnotationNetworksSpec])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name+"="+strings.Join(e.IPAddressNames, ","))
	}
	return out
}

// reconcileVM runs ReconcileVirtualMachine on ns/name.
func reconcileVM(t *testing.T, s *Simulator, name string) ctrl.Result {
	t.Helper()
	res, err := s.ReconcileVirtualMachine(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		t.Fatalf("ReconcileVirtualMachine(%s): %v", name, err)
	}
	return res
}

// getVM reads ns/name.
func getVM(t *testing.T, s *Simulator, name string) *virtv1.VirtualMachine {
	t.Helper()
	vm := &virtv1.VirtualMachine{}
	if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

// podsOf lists the launcher pods of VM name, oldest first.
func podsOf(t *testing.T, s *Simulator, name string) []corev1.Pod {
	t.Helper()
	pods, err := s.labelledPods(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// podNames are the names of pods.
func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// configuredNIC is SDN's networks-status entry for ClusterNetwork name, configured and up.
func configuredNIC(name string) sdnv1.NetworksStatusEntry {
	return sdnv1.NetworksStatusEntry{Type: "ClusterNetwork", Name: name, IfName: "veth_" + name, Conditions: []sdnv1.NICCondition{
		{Type: sdnv1.NICConditionConfigured, Status: "True", Reason: sdnv1.NICReasonInterfaceConfiguredSuccessfully},
		{Type: sdnv1.NICConditionNegotiated, Status: "True", Reason: sdnv1.NICReasonUp}}}
}

// answerSDN writes networks-status on pod as SDN does: nics.
func answerSDN(t *testing.T, s *Simulator, pod *corev1.Pod, nics ...sdnv1.NetworksStatusEntry) {
	t.Helper()
	answerSDNRaw(t, s, pod, nicsJSON(t, nics...))
}

// nicsJSON is the networks-status annotation reporting nics.
func nicsJSON(t *testing.T, nics ...sdnv1.NetworksStatusEntry) string {
	t.Helper()
	raw, err := json.Marshal(nics)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// answerSDNRaw writes value as pod's networks-status; "" removes it.
func answerSDNRaw(t *testing.T, s *Simulator, pod *corev1.Pod, value string) {
	t.Helper()
	live := &corev1.Pod{}
	if err := s.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), live); err != nil {
		t.Fatal(err)
	}
	base := live.DeepCopy()
	if value == "" {
		delete(live.Annotations, sdnv1.AnnotationNetworksStatus)
	} else {
		metav1.SetMetaDataAnnotation(&live.ObjectMeta, sdnv1.AnnotationNetworksStatus, value)
	}
	if err := s.Client.Patch(context.Background(), live, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// observed is the record's status.observedGeneration.
func observed(t *testing.T, s *Simulator, name string) int64 {
	t.Helper()
	rec := &ipamv1.VirtualMachineIPAM{}
	if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, rec); err != nil {
		t.Fatal(err)
	}
	return rec.Status.ObservedGeneration
}
