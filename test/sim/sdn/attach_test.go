package sdn

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// statusJSON encodes networks-status entries.
func statusJSON(t *testing.T, entries ...sdnv1.NetworksStatusEntry) string {
	t.Helper()
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configuredNIC is a networks-status entry carrying IPAddress name, Configured as given.
func configuredNIC(name string, status metav1.ConditionStatus) sdnv1.NetworksStatusEntry {
	return sdnv1.NetworksStatusEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_a",
		Conditions:       []sdnv1.NICCondition{{Type: sdnv1.NICConditionConfigured, Status: string(status)}},
		IPAddressConfigs: []sdnv1.IPAddressConfig{{Name: name, Address: "10.0.0.10", Network: "10.0.0.0/24"}}}
}

// usedBy decodes status.usedByPods.
func usedBy(t *testing.T, ip *sdnv1.IPAddress) []sdnv1.PodRef {
	t.Helper()
	var out []sdnv1.PodRef
	for _, raw := range ip.Status.UsedByPods {
		var p sdnv1.PodRef
		if err := json.Unmarshal(raw.Raw, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func TestAttachedFollowsTheConfiguredPods(t *testing.T) {
	configuredA := map[string]string{sdnv1.AnnotationNetworksStatus: statusJSON(t, configuredNIC("a", metav1.ConditionTrue))}
	notYet := map[string]string{sdnv1.AnnotationNetworksStatus: statusJSON(t, configuredNIC("a", metav1.ConditionFalse))}
	s, _ := newSim(t, nil, clusterNet("corp", "corp-pool"), clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.12")),
		ipAddr("a", "corp", allocatedTo("10.0.0.10", "10.0.0.0/24")), launcher("virt-launcher-vm-1", notYet))

	_, a := reconcileAttach(t, s, ns, "a")
	if c := meta.FindStatusCondition(a.Status.Conditions, sdnv1.ConditionAttached); c != nil || len(a.Status.UsedByPods) != 0 {
		t.Errorf("before any pod is configured: Attached = %+v, usedByPods %s; want neither", c, a.Status.UsedByPods)
	}

	create(t, s, launcher("virt-launcher-vm-2", configuredA))
	_, a = reconcileIP(t, s, ns, "a")
	if c := meta.FindStatusCondition(a.Status.Conditions, sdnv1.ConditionAttached); c != nil || len(a.Status.UsedByPods) != 0 {
		t.Errorf("the allocator wrote the attachment (Attached = %+v, usedByPods %s): it is the node agents' (sdn-sim-attach)", c, a.Status.UsedByPods)
	}
	_, a = reconcileAttach(t, s, ns, "a")
	c := meta.FindStatusCondition(a.Status.Conditions, sdnv1.ConditionAttached)
	if got := usedBy(t, a); c == nil || c.Status != metav1.ConditionTrue || len(got) != 1 || got[0] != (sdnv1.PodRef{Namespace: ns, Name: "virt-launcher-vm-2"}) {
		t.Errorf("once a pod is configured: Attached = %+v, usedByPods %+v; want True and that pod", c, got)
	}

	if err := s.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-launcher-vm-2"}}); err != nil {
		t.Fatal(err)
	}
	_, a = reconcileAttach(t, s, ns, "a")
	c = meta.FindStatusCondition(a.Status.Conditions, sdnv1.ConditionAttached)
	if c == nil || c.Status != metav1.ConditionFalse || len(a.Status.UsedByPods) != 0 {
		t.Errorf("once the pod is gone: Attached = %+v, usedByPods %s; want False and none", c, a.Status.UsedByPods)
	}
}
