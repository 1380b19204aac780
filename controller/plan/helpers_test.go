package plan

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func runtimeScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sdnv1.AddToScheme, vmv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// compiledSet is the shipped default as the built-in layer under the given policies.
func compiledSet(t *testing.T, layers ...*v1alpha1.ClusterIPAMPolicy) *evaluator.Set {
	t.Helper()
	return compiledSetWith(t, evaluator.Limits{}, layers...)
}

// compiledSetWith is compiledSet under the given limits.
func compiledSetWith(t *testing.T, limits evaluator.Limits, layers ...*v1alpha1.ClusterIPAMPolicy) *evaluator.Set {
	t.Helper()
	c, err := evaluator.NewCompiler(limits)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	builtin, errs := c.Compile(b, b)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	compiled := make([]*evaluator.Policy, len(layers))
	for i, p := range layers {
		if compiled[i], errs = c.Compile(p, nil); len(errs) > 0 {
			t.Fatal(errs)
		}
	}
	return evaluator.NewSet(compiled, builtin)
}

// t0 is the time scopes are observed at.
var t0 = time.Unix(1000, 0)

// autoOf is vm's Auto IPAddress for ClusterNetwork network as vmipam creates it, allocated.
func autoOf(vm *vmv1.VirtualMachine, network, addr string) sdnv1.IPAddress {
	it := &iface{spec: vmv1.NetworksSpec{Type: "ClusterNetwork", Name: network}, key: "ClusterNetwork/" + network,
		autoName: naming.AutoIPAddress(vm.Name, "ClusterNetwork", network)}
	ip := autoIPAddress(vm, it)
	ip.UID, ip.ResourceVersion = types.UID("uid-"+ip.Name), "7"
	ip.Status.Address, ip.Status.Phase = addr, sdnv1.IPAddressPhaseAllocated
	ip.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionTrue}}
	return *ip
}

// entryFor is the networks-spec entry of ClusterNetwork network carrying ipName.
func entryFor(network, ipName string) sdnv1.NetworksSpecEntry {
	return sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: network, IfName: "veth_cn00000000",
		IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{ipName}}
}

// carrying returns the networks-spec annotation of entries.
func carrying(t *testing.T, entries ...sdnv1.NetworksSpecEntry) map[string]string {
	t.Helper()
	data, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{sdnv1.AnnotationNetworksSpec: string(data)}
}

// pooled is a ready network with a pool.
func pooled() *networkInfo {
	return &networkInfo{exists: true, ready: true, pool: &sdnv1.PoolRef{Kind: "ClusterIPAddressPool", Name: "p"}}
}

// recordAttaching is vm's record deciding network attached with its Auto IPAddress ip (an
// allocated address), written at generation 1.
func recordAttaching(vm *vmv1.VirtualMachine, network string, ip *sdnv1.IPAddress) *v1alpha1.VirtualMachineIPAM {
	return &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, Generation: 1,
		ResourceVersion: "5", OwnerReferences: []metav1.OwnerReference{VMOwnerRef(vm)}},
		Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: vm.UID, VMGeneration: vm.Generation, Interfaces: []v1alpha1.InterfaceDecision{{
			Type: "ClusterNetwork", Name: network, Allocation: v1alpha1.AllocationAuto, IPAddressName: ip.Name,
			Address: ip.Status.Address, Attach: true, Hotplug: true}}}}
}

// switchedScope: VM v ran on ClusterNetwork corp (Auto, allocated; its record and its running pod
// attach it) and its spec now names corp2 instead, whose Auto IPAddress was just created and
// waits for SDN. Decided: corp2 Auto and pending; corp removed, hotplug allowed.
func switchedScope(t *testing.T) *scope {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "vm-uid", Generation: 2}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "corp2"}}
	old := autoOf(vm, "corp", "10.0.0.5")
	fresh := autoOf(vm, "corp2", "")
	fresh.Status = sdnv1.IPAddressStatus{Phase: sdnv1.IPAddressPhasePending}
	fresh.CreationTimestamp = metav1.NewTime(t0.Add(-time.Second))
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-v-1", Annotations: carrying(t, entryFor("corp", old.Name))}}
	it := &iface{index: 1, spec: vm.Spec.Networks[1], key: "ClusterNetwork/corp2", dupOf: -1, autoName: fresh.Name,
		network: pooled(), auto: &fresh,
		decision: evaluator.Decision{Allocation: evaluator.AllocationAuto, Skip: true, Reason: evaluator.ReasonIPAddressPending, Hotplug: true},
		problem:  &problem{string(evaluator.ReasonIPAddressPending), "waiting for SDN"}}
	removed := &iface{index: -1, spec: vmv1.NetworksSpec{Type: "ClusterNetwork", Name: "corp"}, key: "ClusterNetwork/corp", dupOf: -1,
		autoName: old.Name, decision: evaluator.Decision{Allocation: evaluator.AllocationAuto, Hotplug: true}}
	return &scope{vm: vm, interfaces: []*iface{it}, removed: []*iface{removed}, owned: []sdnv1.IPAddress{old, fresh},
		pods: []corev1.Pod{pod}, record: recordAttaching(vm, "corp", &old),
		now: t0, ipAddresses: map[string]*sdnv1.IPAddress{old.Name: &old, fresh.Name: &fresh}}
}
