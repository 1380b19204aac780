package vm

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// removedScope is a running VM whose spec kept ClusterNetwork/a and dropped ClusterNetwork/b,
// which its launcher pod and its own networks-spec still carry with b's Auto IPAddress.
func removedScope(t *testing.T, set *evaluator.Set) *scope {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns", UID: "uid-v"}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "a"}}
	autoA, autoB := naming.AutoIPAddress("v", "ClusterNetwork", "a"), naming.AutoIPAddress("v", "ClusterNetwork", "b")
	applied := []sdnv1.NetworksSpecEntry{
		{Type: "ClusterNetwork", Name: "a", IfName: naming.IfName("ClusterNetwork", "a"), IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{autoA}},
		{Type: "ClusterNetwork", Name: "b", IfName: naming.IfName("ClusterNetwork", "b"), IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{autoB}},
	}
	data, err := json.Marshal(applied)
	if err != nil {
		t.Fatal(err)
	}
	vm.Annotations = map[string]string{sdnv1.AnnotationNetworksSpec: string(data)}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-v", Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: string(data)}}}
	owned := func(name, network string) sdnv1.IPAddress {
		ip := *allocatedIP(name, "10.0.0.7")
		ip.Namespace, ip.OwnerReferences = "ns", []metav1.OwnerReference{vmOwnerRef(vm)}
		ip.Annotations = map[string]string{AnnotationInterface: "ClusterNetwork/" + network} // made by vmipam
		ip.Spec = sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: network}}
		return ip
	}
	ipA, ipB := owned(autoA, "a"), owned(autoB, "b")
	return &scope{vm: vm, set: set, pods: []corev1.Pod{pod}, owned: []sdnv1.IPAddress{ipA, ipB},
		ipAddresses: map[string]*sdnv1.IPAddress{autoA: &ipA, autoB: &ipB},
		namespace:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"env": "prod"}}},
		interfaces: []*iface{{index: 1, spec: vm.Spec.Networks[1], key: "ClusterNetwork/a", dupOf: -1, autoName: autoA, auto: &ipA,
			network: &networkInfo{exists: true, ready: true, pool: &sdnv1.PoolRef{Kind: "ClusterIPAddressPool", Name: "p"}}}}}
}

// removedSet is the shipped default, with the prod sample's hotplug layer when atRestart.
func removedSet(t *testing.T, atRestart bool) *evaluator.Set {
	if !atRestart {
		return compiledSet(t)
	}
	return compiledSet(t, &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "prod"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{Hotplug: &v1alpha1.Expression{Expression: "change.kind == 'None' || !change.vmRunning"}}})
}

func TestARemovedInterfaceStaysOnTheRunningPodUntilRestartWhenHotplugSaysNo(t *testing.T) {
	s := removedScope(t, removedSet(t, true))
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	p := plan(s)
	if got := keys(p.Pods[0].Entries); !slices.Equal(got, []string{"ClusterNetwork/a", "ClusterNetwork/b"}) || p.Pods[0].Changed {
		t.Errorf("pod entries = %v (changed %v), want a and b unchanged until the restart", got, p.Pods[0].Changed)
	}
	if got := keys(p.VMNetworksSpec.Entries); !slices.Equal(got, []string{"ClusterNetwork/a"}) {
		t.Errorf("VM entries = %v, want only a for the next launcher pod", got)
	}
	if !slices.Equal(p.PendingRestart, []string{"ClusterNetwork/b"}) || len(p.DeleteIPAddresses) != 0 {
		t.Errorf("pending = %v deletes = %v, want b pending and its IPAddress kept", p.PendingRestart, p.DeleteIPAddresses)
	}
	last := p.Interfaces[len(p.Interfaces)-1]
	if !last.Removed || !last.Attached || last.Decision.Hotplug || last.Decision.Provenance.Hotplug != "prod" {
		t.Errorf("removed interface result = %+v, want removed, still attached, hotplug denied by prod", last)
	}
}

func TestARemovedInterfaceIsUnpluggedAndItsAddressDeletedWhenHotplugAllows(t *testing.T) {
	s := removedScope(t, removedSet(t, false))
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	p := plan(s)
	if got := keys(p.Pods[0].Entries); !slices.Equal(got, []string{"ClusterNetwork/a"}) || !p.Pods[0].Changed {
		t.Errorf("pod entries = %v (changed %v), want b hot-unplugged", got, p.Pods[0].Changed)
	}
	if len(p.PendingRestart) != 0 || !slices.Equal(p.DeleteIPAddresses, []string{s.owned[1].Name}) {
		t.Errorf("pending = %v deletes = %v, want nothing pending and b's IPAddress deleted", p.PendingRestart, p.DeleteIPAddresses)
	}
	if s.removed[0].decision.Trace.Matched == nil || s.removed[0].decision.Skip {
		t.Errorf("removed decision = %+v, want the policies asked, never a skip", s.removed[0].decision)
	}
}

func keys(entries []sdnv1.NetworksSpecEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Type + "/" + e.Name
	}
	return out
}
