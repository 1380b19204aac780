package evaluator_test

import (
	"cmp"
	"context"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// TestCarelessPolicyCannotHandOutAnotherGuestsAddress pins down the safety policy that runs
// after every policy: a policy without the default's skip rules ("careless", over a built-in
// without rules) still cannot attach an address the interface cannot have, and says why with
// the default policy's reasons.
func TestCarelessPolicyCannotHandOutAnotherGuestsAddress(t *testing.T) {
	c := newCompiler(t)
	tests := []struct {
		name   string
		in     func() evaluator.Input
		alloc  string           // the careless policy's allocation; by ipAddressName when ""
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
		}, reason: evaluator.ReasonIPAddressOwnedByAnotherVM, rule: "vmipam:owned-by-another-vm"},
		{name: "static on another network", in: func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.NetworkRef = evaluator.Ref{Kind: "Network", Name: "lan"}
			return in
		}, reason: evaluator.ReasonIPAddressNetworkMismatch, rule: "vmipam:other-network"},
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
		}, reason: evaluator.ReasonNoIPAMPool, rule: "vmipam:address-on-pool-less-network"},
		{name: "auto not allocated yet", in: func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.Allocated, in.IPAddress.Phase, in.IPAddress.Address = false, "Pending", ""
			return in
		}, reason: evaluator.ReasonIPAddressPending, rule: "vmipam:auto-pending"},
		{name: "auto for an interface naming a static IPAddress", in: pooledStatic,
			alloc: "'Auto'", reason: evaluator.ReasonAutoWithIPAddressName, rule: "vmipam:auto-with-ip-address-name"},
		{name: "auto whose IPAddress is another VM's", in: func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.Owner = evaluator.Owner{Name: "web", UID: "uid-web"}
			return in
		}, reason: evaluator.ReasonIPAddressOwnedByAnotherVM, rule: "vmipam:owned-by-another-vm"},
		{name: "auto whose IPAddress nobody controls", in: func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.Owner = evaluator.Owner{}
			return in
		}, reason: evaluator.ReasonIPAddressConflict, rule: "vmipam:auto-not-ours"},
		{name: "auto whose IPAddress is on another network", in: func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.NetworkRef = evaluator.Ref{Kind: "Network", Name: "lan"}
			return in
		}, reason: evaluator.ReasonIPAddressNetworkMismatch, rule: "vmipam:other-network"},
		{name: "static owned by another VM though typed Static", in: func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.Owner = evaluator.Owner{Name: "web", UID: "uid-web"}
			return in
		}, reason: evaluator.ReasonIPAddressOwnedByAnotherVM, rule: "vmipam:owned-by-another-vm"},
		{name: "network missing", in: func() evaluator.Input {
			in := pooledAuto()
			in.Network = evaluator.Network{}
			return in
		}, reason: evaluator.ReasonNetworkNotFound, rule: "vmipam:network-missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alloc := cmp.Or(tt.alloc, "interface.ipAddressName != '' ? 'Static' : 'Auto'")
			careless := evaluator.NewSet([]*evaluator.Policy{mustCompile(t, c, newPolicy("careless", allocation(alloc)))},
				mustCompile(t, c, newPolicy("builtin")))
			d := careless.Decide(context.Background(), tt.in(), evaluator.Options{})
			skipper := ""
			if tt.reason != "" {
				skipper = evaluator.SafetyPolicy
			}
			if d.Skip != (tt.reason != "") || d.Reason != tt.reason || d.Rule != tt.rule ||
				d.Provenance.Allocation != "careless" || d.Provenance.Skip != skipper {
				t.Errorf("Decide = skip %v reason %q rule %q provenance %+v (%s), want skip %v reason %q rule %q, allocation by careless",
					d.Skip, d.Reason, d.Rule, d.Provenance, d.Message, tt.reason != "", tt.reason, tt.rule)
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
