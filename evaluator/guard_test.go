package evaluator_test

import (
	"context"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// TestCarelessPolicyCannotHandOutAnotherGuestsAddress pins down the checks Decide makes after
// any policy: a policy without the default's skip rules ("careless") still cannot attach an
// address the interface cannot have, and says why with the default policy's reasons.
func TestCarelessPolicyCannotHandOutAnotherGuestsAddress(t *testing.T) {
	c := newCompiler(t)
	careless := evaluator.NewSet([]*evaluator.Policy{
		mustCompile(t, c, newPolicy("careless", allocation("interface.ipAddressName != '' ? 'Static' : 'Auto'"))),
	}, mustCompile(t, c, newPolicy("builtin")))
	tests := []struct {
		name   string
		in     func() evaluator.Input
		reason evaluator.Reason // "" when the interface is attached
		rule   string
	}{
		{name: "static allocated and free is attached", in: pooledStatic},
		{name: "auto allocated is attached", in: pooledAuto},
		{name: "static held by another VM", in: func() evaluator.Input {
			in := pooledStatic()
			in.Holders = evaluator.Holders{VMs: []string{"web"}, Holder: "web"}
			return in
		}, reason: evaluator.ReasonIPAddressInUse, rule: "vmipam:static-held-by-another-vm"},
		{name: "static naming another VM's Auto IPAddress", in: func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.Type, in.IPAddress.Owner = "Auto", evaluator.Owner{Name: "web", UID: "uid-web"}
			return in
		}, reason: evaluator.ReasonIPAddressOwnedByAnotherVM, rule: "vmipam:static-owned-by-another-vm"},
		{name: "static on another network", in: func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.NetworkRef = evaluator.Ref{Kind: "Network", Name: "lan"}
			return in
		}, reason: evaluator.ReasonIPAddressNetworkMismatch, rule: "vmipam:static-other-network"},
		{name: "static missing", in: func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress = evaluator.IPAddress{Name: "web"}
			return in
		}, reason: evaluator.ReasonIPAddressNotFound, rule: "vmipam:static-missing"},
		{name: "static not allocated", in: func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.Allocated, in.IPAddress.Phase, in.IPAddress.Address = false, "Pending", ""
			return in
		}, reason: evaluator.ReasonIPAddressNotAllocated, rule: "vmipam:static-not-allocated"},
		{name: "auto on a network without pool", in: func() evaluator.Input {
			in := pooledAuto()
			in.Network.IPAMEnabled, in.Network.Pool = false, evaluator.Ref{}
			return in
		}, reason: evaluator.ReasonNoIPAMPool, rule: "vmipam:auto-on-pool-less-network"},
		{name: "auto not allocated yet", in: func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.Allocated, in.IPAddress.Phase, in.IPAddress.Address = false, "Pending", ""
			return in
		}, reason: evaluator.ReasonIPAddressPending, rule: "vmipam:auto-pending"},
		{name: "network missing", in: func() evaluator.Input {
			in := pooledAuto()
			in.Network = evaluator.Network{}
			return in
		}, reason: evaluator.ReasonNetworkNotFound, rule: "vmipam:network-missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := careless.Decide(context.Background(), tt.in(), evaluator.Options{})
			if d.Skip != (tt.reason != "") || d.Reason != tt.reason || d.Rule != tt.rule || d.Policy != "careless" {
				t.Errorf("Decide = skip %v reason %q rule %q policy %q (%s), want skip %v reason %q rule %q by careless",
					d.Skip, d.Reason, d.Rule, d.Policy, d.Message, tt.reason != "", tt.reason, tt.rule)
			}
		})
	}
}

func TestStaticWithoutIPAddressNameIsSkipped(t *testing.T) {
	c := newCompiler(t)
	set := evaluator.NewSet([]*evaluator.Policy{mustCompile(t, c, newPolicy("static", allocation("'Static'")))},
		mustCompile(t, c, newPolicy("builtin")))
	d := set.Decide(context.Background(), pooledAuto(), evaluator.Options{})
	if !d.Skip || d.Reason != evaluator.ReasonIPAddressNotFound || d.Message != "the policy chose Static, but spec.networks[1].ipAddressName is empty" {
		t.Errorf("Decide = %+v, want a skip IPAddressNotFound naming the empty ipAddressName", d)
	}
}
