package plan

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/firstseen"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// skewAhead is how far the API server's clock runs ahead of the controller's in these tests.
const skewAhead = time.Hour

// TestAGraceTimedFromACreationLastsItsLengthWhenTheAPIServersClockRunsAhead: an object the
// API server dated an hour after the controller's now — its clock runs ahead — waits its
// grace from when the controller first saw it, not an hour more; without anything that
// remembers (a dry run) it waits the grace from every now. Each case goes through Compute, as
// the reconciler calls it, for the three graces timed from a creation: a network SDN has not
// answered, an Auto IPAddress SDN has not answered, and one SDN answered without an address.
func TestAGraceTimedFromACreationLastsItsLengthWhenTheAPIServersClockRunsAhead(t *testing.T) {
	ahead := metav1.NewTime(t0.Add(skewAhead))
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "uid-v", Generation: 1}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "corp"}}
	network := func(answered bool) *sdnv1.ClusterNetwork {
		n := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "corp", UID: "uid-corp", CreationTimestamp: ahead},
			Spec: sdnv1.ClusterNetworkSpec{IPAM: &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindClusterIPAddressPool, Name: "p"}}}}
		if answered {
			n.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "NetworkReady"}}
		}
		return n
	}
	auto := func(answered bool) *sdnv1.IPAddress {
		ip := autoOf(vm, "corp", "")
		ip.CreationTimestamp, ip.Status = ahead, sdnv1.IPAddressStatus{}
		if answered { // SDN answered, but has no address for it yet
			ip.Status.Phase = sdnv1.IPAddressPhasePending
		}
		return &ip
	}
	for _, c := range []struct {
		name   string
		world  []client.Object
		reason evaluator.Reason
		grace  time.Duration
	}{
		{"a network SDN has not answered", []client.Object{network(false)}, evaluator.ReasonNetworkNotReady, FreshPendingGrace},
		{"an Auto IPAddress SDN has not answered", []client.Object{network(true), auto(false)}, evaluator.ReasonIPAddressPending, UnansweredGrace},
		{"an Auto IPAddress SDN answered without an address", []client.Object{network(true), auto(true)}, evaluator.ReasonIPAddressPending, FreshPendingGrace},
	} {
		t.Run(c.name, func(t *testing.T) {
			world := fakeWorld(t, c.world...)
			compute := func(now time.Time, firstSeen func(types.UID, time.Time) time.Time) *Plan {
				t.Helper()
				p, err := Compute(context.Background(), world, compiledSet(t), vm, Options{Now: now, FirstSeen: firstSeen})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			seen := firstseen.New(0)
			if p := compute(t0, seen.At); !p.Deferred || p.RetryAfter != c.grace {
				t.Fatalf("first look: deferred %v, retry after %v; want deferred, retry after %v (the grace, not the skew too)",
					p.Deferred, p.RetryAfter, c.grace)
			}
			p := compute(t0.Add(c.grace), seen.At)
			if p.Deferred || !p.RecordChanged || len(p.Record.Spec.Interfaces) != 1 || p.Record.Spec.Interfaces[0].Reason != string(c.reason) {
				t.Fatalf("after the grace: deferred %v, record written %v (%+v); want the %s reported", p.Deferred, p.RecordChanged,
					p.Record.Spec.Interfaces, c.reason)
			}
			if p := compute(t0.Add(c.grace), nil); !p.Deferred || p.RetryAfter != c.grace {
				t.Fatalf("nothing remembers: deferred %v, retry after %v; want the grace from now, %v", p.Deferred, p.RetryAfter, c.grace)
			}
		})
	}
}
