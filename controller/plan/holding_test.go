package plan

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// staticOnly refuses every interface decided Auto: "these VMs must use static addresses".
var staticOnly = &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "static-only"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
	SkipRules: []v1alpha1.SkipRule{{Name: "auto-refused", Expression: "allocation == 'Auto'", Reason: "StaticAddressRequired",
		Message: "this namespace requires static addresses"}}}}

// corpWorld is a ClusterNetwork corp with a pool, Ready as ready says, and the VM v on it.
func corpWorld(ready bool, extra ...client.Object) (*vmv1.VirtualMachine, []client.Object) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "vm-uid", Generation: 1}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "corp"}}
	network := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "corp"}}
	network.Spec.IPAM = &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: "ClusterIPAddressPool", Name: "corp-pool"}}
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	network.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: status, Reason: "Test"}}
	return vm, append([]client.Object{vm, network}, extra...)
}

// An interface a policy refuses takes no address from the pool: nothing is created, and the
// record names no IPAddress for it. One skipped for a transient reason (the network not Ready
// yet) gets its Auto IPAddress at once, so that it is attached as soon as the network is.
func TestARefusedInterfaceHoldsNoAddressAndATransientSkipDoes(t *testing.T) {
	vm, objs := corpWorld(true)
	p, err := Compute(context.Background(), fakeWorld(t, objs...), compiledSet(t, staticOnly), vm, Options{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Record.Spec.Interfaces[0]
	if len(p.CreateIPAddresses) != 0 || d.Attach || d.IPAddressName != "" || d.Reason != "StaticAddressRequired" {
		t.Errorf("refused: creates %d IPAddresses, record %+v; want none, not attached, no IPAddress, the rule's reason",
			len(p.CreateIPAddresses), d)
	}

	vm, objs = corpWorld(false)
	p, err = Compute(context.Background(), fakeWorld(t, objs...), compiledSet(t), vm, Options{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	d = p.Record.Spec.Interfaces[0]
	if len(p.CreateIPAddresses) != 1 || d.Attach || d.IPAddressName != p.CreateIPAddresses[0].Name || d.Reason != "NetworkNotReady" {
		t.Errorf("network not ready: creates %d IPAddresses, record %+v; want its Auto IPAddress, named in the record", len(p.CreateIPAddresses), d)
	}
}

// A policy that starts refusing an interface that has an Auto IPAddress releases it (a stopped
// VM carries nothing, so the release starts at once).
func TestAnInterfaceRefusedLaterReleasesItsAutoIPAddress(t *testing.T) {
	vm, _ := corpWorld(true)
	ip := autoOf(vm, "corp", "10.0.0.5")
	vm, objs := corpWorld(true, &ip, recordAttaching(vm, "corp", &ip))
	p, err := Compute(context.Background(), fakeWorld(t, objs...), compiledSet(t, staticOnly), vm, Options{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if !equal(p.Releasing, ip.Name) || p.Record.Spec.Interfaces[0].Attach {
		t.Errorf("releasing %v, record %+v; want %s released and the interface not attached", p.Releasing, p.Record.Spec.Interfaces[0], ip.Name)
	}
}
