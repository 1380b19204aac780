package reads

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
			// The same update as a metadata-only watch (NewCache) delivers it: what vmipam
			// reads of the metadata decides alike; the phase and spec are not in it.
			wantMeta := tt.want && updated.Status.Phase == base.Status.Phase
			if got := Changed(metadataOf(base), metadataOf(updated)); got != wantMeta {
				t.Errorf("Changed of the metadata = %v, want %v", got, wantMeta)
			}
		})
	}
	if !Changed(base, &vmv1.VirtualMachine{}) {
		t.Errorf("objects of two kinds are reported unchanged")
	}
	if !Changed(metadataOf(base), base) || !Changed(metadataOf(base), &metav1.PartialObjectMetadata{ObjectMeta: base.ObjectMeta}) {
		t.Errorf("a pod's metadata against a typed pod, or against metadata of no kind, is reported unchanged")
	}
}

// metadataOf is p as a metadata-only watch of pods delivers it.
func metadataOf(p *corev1.Pod) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: *p.ObjectMeta.DeepCopy()}
	m.SetGroupVersionKind(podKind)
	return m
}

// TestSDNStatusChangesThatShowNothing pins down which SDN writes bring a VM back: an
// IPAddress's answer (address, phase, Allocated) and a network's labels, spec and readiness —
// never the node agent's Attached condition and usedByPods, the routes, or a network's
// attachment counts, which change as pods and nodes come and go (issue #28's stand-in writes
// them as SDN does; before, each woke every VM of the address or network).
func TestSDNStatusChangesThatShowNothing(t *testing.T) {
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-a", ResourceVersion: "1"},
		Status: sdnv1.IPAddressStatus{Address: "10.0.0.5", Phase: "Allocated",
			Conditions: []metav1.Condition{{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionTrue, Reason: "IPAddressAllocated"}}}}
	for _, tt := range []struct {
		name   string
		change func(*sdnv1.IPAddress)
		want   bool
	}{
		{"Attached", func(ip *sdnv1.IPAddress) {
			ip.Status.Conditions = append(ip.Status.Conditions, metav1.Condition{Type: "Attached", Status: metav1.ConditionTrue})
		}, false},
		{"usedByPods", func(ip *sdnv1.IPAddress) {
			ip.Status.UsedByPods = []apiextensionsv1.JSON{{Raw: []byte(`{"name":"virt-launcher-web-x"}`)}}
		}, false},
		{"a label", func(ip *sdnv1.IPAddress) { ip.Labels = map[string]string{"team": "a"} }, false},
		{"address", func(ip *sdnv1.IPAddress) { ip.Status.Address = "10.0.0.6" }, true},
		{"Allocated reason", func(ip *sdnv1.IPAddress) { ip.Status.Conditions[0].Reason = "NoFreeIPAddress" }, true},
		{"being deleted", func(ip *sdnv1.IPAddress) { ip.DeletionTimestamp = &metav1.Time{} }, true},
	} {
		t.Run("IPAddress "+tt.name, func(t *testing.T) {
			updated := ip.DeepCopy()
			updated.ResourceVersion = "2"
			tt.change(updated)
			if got := Changed(ip, updated); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
		})
	}
	n := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "corp", ResourceVersion: "1"},
		Status: sdnv1.NetworkStatus{Conditions: []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue}}}}
	for _, tt := range []struct {
		name   string
		change func(*sdnv1.ClusterNetwork)
		want   bool
	}{
		{"attachment counts", func(n *sdnv1.ClusterNetwork) { n.Status.ReadyNodeAttachementsCount = new(int32) }, false},
		{"Ready's message", func(n *sdnv1.ClusterNetwork) { n.Status.Conditions[0].Message = "3 of 3 nodes" }, false},
		{"Ready", func(n *sdnv1.ClusterNetwork) { n.Status.Conditions[0].Status = metav1.ConditionFalse }, true},
		{"a label (a policy input)", func(n *sdnv1.ClusterNetwork) { n.Labels = map[string]string{"tier": "prod"} }, true},
		{"pool", func(n *sdnv1.ClusterNetwork) { n.Spec.IPAM = &sdnv1.NetworkIPAM{} }, true},
	} {
		t.Run("ClusterNetwork "+tt.name, func(t *testing.T) {
			updated := n.DeepCopy()
			updated.ResourceVersion = "2"
			tt.change(updated)
			if got := Changed(n, updated); got != tt.want {
				t.Errorf("Changed = %v, want %v", got, tt.want)
			}
		})
	}
	// SDN's first answer, even "not Ready", ends the wait for it (plan's graceLeft).
	fresh := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "corp", ResourceVersion: "1"}}
	answered := fresh.DeepCopy()
	answered.ResourceVersion = "2"
	answered.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionFalse}}
	if !Changed(fresh, answered) {
		t.Error("SDN's first Ready condition (False) is not a change, want one: the VMs waiting for it must look again")
	}
}
