package reads

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
)

// TestVMStatusChangesThatShowNothing pins down which status updates of the virtualization
// controller bring a VM back: only those of what vmipam reads (the phase, each entry's network
// and MAC), never its conditions or the addresses it reports.
func TestVMStatusChangesThatShowNothing(t *testing.T) {
	base := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Status: vmv1.VirtualMachineStatus{Phase: vmv1.PhaseRunning,
			Networks: []vmv1.NetworksStatus{{Type: vmv1.NetworkTypeNetwork, Name: "n", IPAddress: "10.0.0.5", MACAddress: "02:00:00:00:00:01"}},
			Conditions: []metav1.Condition{{Type: "NetworkReady", Status: metav1.ConditionTrue, Reason: "NetworkReady"},
				{Type: "AgentReady", Status: metav1.ConditionFalse, Reason: "NoAgent"}}}}
	for _, tt := range []struct {
		name   string
		change func(*vmv1.VirtualMachineStatus)
		want   bool
	}{
		{"NetworkReady changed", func(st *vmv1.VirtualMachineStatus) { st.Conditions[0].Status = metav1.ConditionFalse }, false},
		{"another writer's condition", func(st *vmv1.VirtualMachineStatus) { st.Conditions[1].Status = metav1.ConditionTrue }, false},
		{"observedGeneration", func(st *vmv1.VirtualMachineStatus) { st.ObservedGeneration = 3 }, false},
		{"ipAddress cleared", func(st *vmv1.VirtualMachineStatus) { st.Networks[0].IPAddress = "" }, false},
		{"phase", func(st *vmv1.VirtualMachineStatus) { st.Phase = vmv1.PhaseStopped }, true},
		{"macAddress changed (a policy input)", func(st *vmv1.VirtualMachineStatus) { st.Networks[0].MACAddress = "02:00:00:00:00:02" }, true},
		{"entry added", func(st *vmv1.VirtualMachineStatus) {
			st.Networks = append(st.Networks, vmv1.NetworksStatus{Type: vmv1.NetworkTypeMain})
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			updated.ResourceVersion = "2"
			tt.change(&updated.Status)
			if got := Changed(base, updated); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLauncherPodChangesThatShowNothing: of a launcher pod's updates, only those of what
// vmipam reads bring its VM back — what is applied (networks-spec, decided), the VM label,
// the phase, deletion — never SDN's answer, other annotations or the pod's spec.
func TestLauncherPodChangesThatShowNothing(t *testing.T) {
	base := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-web-x", ResourceVersion: "1",
		Labels:      map[string]string{vmv1.LabelLauncherVMName: "web"},
		Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: `[]`, "network.deckhouse.io/networks-status": `[]`}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	now := metav1.Now()
	for _, tt := range []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"SDN answered", func(p *corev1.Pod) { p.Annotations["network.deckhouse.io/networks-status"] = `[{"name":"n"}]` }, false},
		{"a label vmipam does not read", func(p *corev1.Pod) { p.Labels["kubevirt.io/created-by"] = "u" }, false},
		{"the spec", func(p *corev1.Pod) { p.Spec.NodeName = "node-1"; p.Generation = 2 }, false},
		{"networks-spec", func(p *corev1.Pod) { p.Annotations[sdnv1.AnnotationNetworksSpec] = `[{"type":"Network","name":"n"}]` }, true},
		{"decided", func(p *corev1.Pod) { p.Annotations[consumer.AnnotationDecided] = "" }, true},
		{"phase", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, true},
		{"deletion", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, true},
		{"the VM label", func(p *corev1.Pod) { p.Labels[vmv1.LabelLauncherVMName] = "other" }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			updated.ResourceVersion = "2"
			tt.change(updated)
			if got := Changed(base, updated); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
		})
	}
	if !Changed(base, &vmv1.VirtualMachine{}) {
		t.Errorf("objects of two kinds are reported unchanged")
	}
}
