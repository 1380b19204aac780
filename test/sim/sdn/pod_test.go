package sdn

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/sim/internal/mac"
)

// launcher is a launcher pod of VM "vm" with the given annotations.
func launcher(name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: name, Annotations: annotations,
		Labels: map[string]string{virtv1.LabelLauncherVMName: "vm"},
	}}
}

// specJSON encodes networks-spec entries.
func specJSON(t *testing.T, entries ...sdnv1.NetworksSpecEntry) string {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reconcilePod runs ReconcilePod and returns the pod's networks-status entries afterwards.
func reconcilePod(t *testing.T, s *Simulator, name string) (*corev1.Pod, []sdnv1.NetworksStatusEntry, bool) {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	if _, err := s.ReconcilePod(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatalf("ReconcilePod: %v", err)
	}
	pod := &corev1.Pod{}
	if err := s.Client.Get(context.Background(), key, pod); err != nil {
		t.Fatal(err)
	}
	raw, ok := pod.Annotations[sdnv1.AnnotationNetworksStatus]
	var entries []sdnv1.NetworksStatusEntry
	if ok {
		if err := json.Unmarshal([]byte(raw), &entries); err != nil {
			t.Fatalf("networks-status %q: %v", raw, err)
		}
	}
	return pod, entries, ok
}

func TestReconcilePodNetworksStatus(t *testing.T) {
	spec := []sdnv1.NetworksSpecEntry{
		{ID: 2, Type: "ClusterNetwork", Name: "corp", IfName: "veth_a", IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{"vm-corp"}},
		{ID: 3, Type: "Network", Name: "lan", IfName: "veth_b", IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{"vm-lan"}},
		{ID: 4, Type: "Network", Name: "l2", IfName: "veth_c"},
	}
	s, _ := newSim(t, nil,
		launcher("virt-launcher-vm-abcde", map[string]string{sdnv1.AnnotationNetworksSpec: specJSON(t, spec...)}),
		ipAddr("vm-corp", "corp", allocatedTo("10.0.0.10", "10.0.0.0/24")),
		ipAddr("vm-lan", "lan", onNetwork)) // not allocated yet
	_, got, ok := reconcilePod(t, s, "virt-launcher-vm-abcde")
	if !ok {
		t.Fatal("no networks-status written")
	}
	up := []sdnv1.NICCondition{ // the reasons SDN documents
		{Type: "Configured", Status: "True", Reason: "InterfaceConfiguredSuccessfully"},
		{Type: "Negotiated", Status: "True", Reason: "Up"},
	}
	want := []sdnv1.NetworksStatusEntry{
		{Type: "ClusterNetwork", Name: "corp", IfName: "veth_a", MAC: mac.NIC(ns, "vm", "ClusterNetwork", "corp", 0), Conditions: up,
			IPAddressConfigs: []sdnv1.IPAddressConfig{{Name: "vm-corp", Address: "10.0.0.10", Network: "10.0.0.0/24"}}},
		{Type: "Network", Name: "lan", IfName: "veth_b", MAC: mac.NIC(ns, "vm", "Network", "lan", 0), Conditions: up},
		{Type: "Network", Name: "l2", IfName: "veth_c", MAC: mac.NIC(ns, "vm", "Network", "l2", 0), Conditions: up},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("networks-status =\n%+v\nwant\n%+v", got, want)
	}
}

func TestReconcilePod(t *testing.T) {
	spec := sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_a"}
	tests := []struct {
		name        string
		pod         *corev1.Pod
		wantPresent bool
		wantEntries int
	}{
		{name: "pod without networks-spec gets no networks-status", pod: launcher("p", nil)},
		{name: "empty networks-spec is answered with an empty list", pod: launcher("p", map[string]string{sdnv1.AnnotationNetworksSpec: "[]"}), wantPresent: true},
		{
			name:        "networks-status follows a removed networks-spec",
			pod:         launcher("p", map[string]string{sdnv1.AnnotationNetworksStatus: `[{"type":"x"}]`}),
			wantPresent: false,
		},
		{
			name: "pods that are not launchers are ignored",
			pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p",
				Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: specJSON(t, spec)}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(t, nil, tt.pod)
			_, entries, present := reconcilePod(t, s, "p")
			if present != tt.wantPresent || len(entries) != tt.wantEntries {
				t.Errorf("networks-status present=%v entries=%d, want present=%v entries=%d", present, len(entries), tt.wantPresent, tt.wantEntries)
			}
		})
	}
}

func TestReconcilePodPatchesOnlyOnChange(t *testing.T) {
	spec := sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_a", IPAddressNames: []string{"a"}}
	s, _ := newSim(t, nil, launcher("p", map[string]string{sdnv1.AnnotationNetworksSpec: specJSON(t, spec)}), ipAddr("a", "corp"))
	first, _, _ := reconcilePod(t, s, "p")
	second, _, _ := reconcilePod(t, s, "p")
	if first.ResourceVersion != second.ResourceVersion {
		t.Errorf("unchanged answer patched the pod: resourceVersion %s -> %s", first.ResourceVersion, second.ResourceVersion)
	}

	ip := &sdnv1.IPAddress{}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, ip); err != nil {
		t.Fatal(err)
	}
	ip.Status = sdnv1.IPAddressStatus{Phase: sdnv1.IPAddressPhaseAllocated, Address: "10.0.0.7", Network: "10.0.0.0/24"}
	if err := s.Client.Status().Update(context.Background(), ip); err != nil {
		t.Fatal(err)
	}
	_, entries, _ := reconcilePod(t, s, "p")
	if len(entries) != 1 || len(entries[0].IPAddressConfigs) != 1 || entries[0].IPAddressConfigs[0].Address != "10.0.0.7" {
		t.Errorf("after allocation networks-status = %+v, want the address of a", entries)
	}
}

func TestReconcilePodRejectsInvalidSpec(t *testing.T) {
	s, _ := newSim(t, nil, launcher("p", map[string]string{sdnv1.AnnotationNetworksSpec: "{not json"}))
	_, err := s.ReconcilePod(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "p"}})
	if err == nil {
		t.Fatal("ReconcilePod accepted an invalid networks-spec")
	}
}

func TestPodsUsing(t *testing.T) {
	uses := sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_a", IPAddressNames: []string{"a"}}
	other := sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_a", IPAddressNames: []string{"b"}}
	s, _ := newSim(t, nil,
		launcher("uses", map[string]string{sdnv1.AnnotationNetworksSpec: specJSON(t, uses)}),
		launcher("other", map[string]string{sdnv1.AnnotationNetworksSpec: specJSON(t, other)}),
		launcher("none", nil))
	got := s.podsUsing(context.Background(), ipAddr("a", "corp"))
	if len(got) != 1 || got[0].Name != "uses" {
		t.Errorf("podsUsing(a) = %v, want only default/uses", got)
	}
}
