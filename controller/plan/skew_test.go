package plan

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/firstseen"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// skewCase is a VM whose one additional interface waits out a grace timed from the creation of
// an object the API server dated skew after t0, the controller's now.
type skewCase struct {
	name   string
	static bool // the interface names the static IPAddress "s"
	world  func(skew time.Duration) []client.Object
	reason evaluator.Reason
	grace  time.Duration
}

// TestAGraceTimedFromACreationLastsItsLengthWhenTheAPIServersClockRunsAhead: an object the
// API server dated after the controller's now — its clock runs ahead, by an hour or by less
// than the grace — waits its grace from when the controller first saw it, neither the skew
// on top nor from the timestamp once the clock passes it: the plan is deferred until exactly
// the grace has passed, each look pointing its retry there, then the problem is reported.
// Without anything that remembers (a dry run) it waits the grace from every now. Each case
// goes through Compute, as the reconciler calls it, for the four graces timed from a
// creation.
func TestAGraceTimedFromACreationLastsItsLengthWhenTheAPIServersClockRunsAhead(t *testing.T) {
	for _, c := range skewCases() {
		for _, skew := range []time.Duration{time.Hour, c.grace * 2 / 5} {
			t.Run(c.name+" "+skew.String()+" ahead", func(t *testing.T) {
				world := fakeWorld(t, c.world(skew)...)
				compute := func(now time.Time, created func(metav1.Object, time.Time) time.Time) *Plan {
					t.Helper()
					p, err := Compute(context.Background(), world, compiledSet(t), skewVM(c.static), Options{Now: now, Created: created})
					if err != nil {
						t.Fatal(err)
					}
					return p
				}
				seen := firstseen.New(0)
				step := c.grace / 20
				now := t0
				for ; ; now = now.Add(step) {
					p := compute(now, seen.Created)
					if !p.Deferred {
						if len(p.Record.Spec.Interfaces) != 1 || p.Record.Spec.Interfaces[0].Reason != string(c.reason) {
							t.Fatalf("at +%v: record %+v; want the %s reported", now.Sub(t0), p.Record.Spec.Interfaces, c.reason)
						}
						break
					}
					if due := now.Add(p.RetryAfter); !due.Equal(t0.Add(c.grace)) {
						t.Fatalf("at +%v: retry after %v, at +%v; want at +%v, when the grace ends", now.Sub(t0), p.RetryAfter,
							due.Sub(t0), c.grace)
					}
				}
				if !now.Equal(t0.Add(c.grace)) {
					t.Fatalf("reported at +%v; want at +%v, the grace from the first sight", now.Sub(t0), c.grace)
				}
				if p := compute(t0.Add(c.grace), nil); !p.Deferred || p.RetryAfter != min(c.grace, skew) {
					t.Fatalf("nothing remembers: deferred %v, retry after %v; want the grace from now, or the timestamp passed",
						p.Deferred, p.RetryAfter)
				}
			})
		}
	}
}

// skewVM is the VM of the skew cases: on ClusterNetwork corp, naming the static IPAddress "s"
// when static.
func skewVM(static bool) *vmv1.VirtualMachine {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "uid-v", Generation: 1}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "corp"}}
	if static {
		vm.Spec.Networks[1].IPAddressName = "s"
	}
	return vm
}

// skewCases are the four graces timed from a creation (graceLeft).
func skewCases() []skewCase {
	network := func(skew time.Duration, answered bool) *sdnv1.ClusterNetwork {
		n := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "corp", UID: "uid-corp", CreationTimestamp: metav1.NewTime(t0.Add(skew))},
			Spec: sdnv1.ClusterNetworkSpec{IPAM: &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindClusterIPAddressPool, Name: "p"}}}}
		if answered {
			n.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "NetworkReady"}}
		}
		return n
	}
	auto := func(skew time.Duration, answered bool) *sdnv1.IPAddress {
		ip := autoOf(skewVM(false), "corp", "")
		ip.CreationTimestamp, ip.Status = metav1.NewTime(t0.Add(skew)), sdnv1.IPAddressStatus{}
		if answered { // SDN answered, but has no address for it yet
			ip.Status.Phase = sdnv1.IPAddressPhasePending
		}
		return &ip
	}
	static := func(skew time.Duration) *sdnv1.IPAddress {
		return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s", UID: "uid-s", CreationTimestamp: metav1.NewTime(t0.Add(skew))},
			Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeStatic, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: "corp"},
				Static: &sdnv1.StaticIP{IP: "10.0.0.9"}}}
	}
	return []skewCase{
		{name: "a network SDN has not answered", reason: evaluator.ReasonNetworkNotReady, grace: FreshPendingGrace,
			world: func(skew time.Duration) []client.Object { return []client.Object{network(skew, false)} }},
		{name: "an Auto IPAddress SDN has not answered", reason: evaluator.ReasonIPAddressPending, grace: UnansweredGrace,
			world: func(skew time.Duration) []client.Object { return []client.Object{network(0, true), auto(skew, false)} }},
		{name: "an Auto IPAddress SDN answered without an address", reason: evaluator.ReasonIPAddressPending, grace: FreshPendingGrace,
			world: func(skew time.Duration) []client.Object { return []client.Object{network(0, true), auto(skew, true)} }},
		{name: "a static IPAddress SDN has not answered", static: true, reason: evaluator.ReasonIPAddressNotAllocated, grace: UnansweredGrace,
			world: func(skew time.Duration) []client.Object { return []client.Object{network(0, true), static(skew)} }},
	}
}

// TestAStaticIPAddressSDNHasNotAnsweredWaitsAsAnAutoOneDoes: a static IPAddress SDN has not
// written any status on waits UnansweredGrace from its creation, as an unanswered Auto one of
// a VM with a record does — for a new VM too: not the backlog rule, as nothing would wake the
// VM if SDN fell quiet (the stall notice reaches the owners of unanswered IPAddresses only) —
// and an answer without an address is reported at once. Round 19 hot-plugged 100 running VMs
// by creating their static IPAddresses at once; at 10,000 VMs SDN's stand-in answered the last
// of them more than FreshPendingGrace after their creation, and 14 VMs were written
// IPAddressNotAllocated, with a Warning, then written again with the address.
func TestAStaticIPAddressSDNHasNotAnsweredWaitsAsAnAutoOneDoes(t *testing.T) {
	var static skewCase
	for _, c := range skewCases() {
		if c.static {
			static = c
		}
	}
	compute := func(world client.Reader, opts Options) *Plan {
		t.Helper()
		opts.Now = t0
		p, err := Compute(context.Background(), world, compiledSet(t), skewVM(true), opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The running VM's record, written before the IPAddress existed: the interface skipped.
	record := compute(fakeWorld(t, static.world(0)[0]), Options{}).Record
	if len(record.Spec.Interfaces) != 1 || record.Spec.Interfaces[0].Reason != string(evaluator.ReasonIPAddressNotFound) {
		t.Fatalf("record before the IPAddress: %+v, want it skipped as IPAddressNotFound", record.Spec.Interfaces)
	}
	sdnBusy := func(*sdnv1.IPAddress) time.Time { return t0.Add(-time.Second) }
	for _, c := range []struct {
		name      string
		age       time.Duration
		newVM     bool
		answered  bool
		wantRetry time.Duration // 0: reported now
	}{
		{"a running VM's, 10s old", 10 * time.Second, false, false, UnansweredGrace - 10*time.Second},
		{"a running VM's, past UnansweredGrace", UnansweredGrace + time.Second, false, false, 0},
		{"a new VM's, 10s old, SDN answering others on its network", 10 * time.Second, true, false, UnansweredGrace - 10*time.Second},
		{"a new VM's, past UnansweredGrace, SDN answering others on its network", UnansweredGrace + time.Second, true, false, 0},
		{"answered without an address, 2s old", 2 * time.Second, false, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs := static.world(-c.age)
			if c.answered {
				ip := objs[1].(*sdnv1.IPAddress)
				ip.Status.Phase = sdnv1.IPAddressPhasePending
				ip.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionFalse,
					Reason: "IPLeased", Message: "kept by an orphaned IPAddressLease"}}
			}
			if !c.newVM {
				objs = append(objs, record.DeepCopy())
			}
			p := compute(fakeWorld(t, objs...), Options{SDNLastAnswer: sdnBusy})
			if c.wantRetry > 0 {
				if !p.Deferred || p.RetryAfter != c.wantRetry {
					t.Fatalf("deferred %v, retry after %v, record %+v; want deferred, retry after %v",
						p.Deferred, p.RetryAfter, p.Record.Spec.Interfaces, c.wantRetry)
				}
				return
			}
			if p.Deferred || len(p.Record.Spec.Interfaces) != 1 || p.Record.Spec.Interfaces[0].Reason != string(evaluator.ReasonIPAddressNotAllocated) {
				t.Fatalf("deferred %v, record %+v; want IPAddressNotAllocated reported now", p.Deferred, p.Record.Spec.Interfaces)
			}
		})
	}
}
