package evaluator_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// TestNoPolicyAttachesAnAddressTheInterfaceCannotHave generates policy sets — allocations of
// every kind and Pass, the default's rules disabled by name or not, Ignore and Audit layers —
// and interfaces in every state, and checks the safety policy's promise: an interface attached
// with an address (Auto or Static, not skipped) has an address that exists, is allocated, is
// on the interface's network, is nobody else's, is not held by another VM; and an Auto
// interface never names a static IPAddress (the input would describe the wrong address).
func TestNoPolicyAttachesAnAddressTheInterfaceCannotHave(t *testing.T) {
	c := newCompiler(t)
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	builtin := mustCompile(t, c, b)
	rng := rand.New(rand.NewPCG(14, 2026))
	attached := 0
	for i := range 400 {
		ps := randomPolicies(rng, b)
		compiled := make([]*evaluator.Policy, len(ps))
		for j, p := range ps {
			compiled[j] = mustCompile(t, c, p)
		}
		set := evaluator.NewSet(compiled, builtin)
		for range 10 {
			in := randomInput(rng)
			d := decide(set, in)
			if d.Skip || (d.Allocation != evaluator.AllocationAuto && d.Allocation != evaluator.AllocationStatic) {
				continue
			}
			attached++
			if why := unsafe(in, d); why != "" {
				t.Fatalf("set %d (%s) attaches %s: %s\ninput %+v\ndecision %+v", i, describe(ps), d.Allocation, why, in, d)
			}
		}
	}
	if attached < 200 {
		t.Errorf("only %d of 4000 generated interfaces were attached with an address: the generator is too narrow", attached)
	}
}

// unsafe says what is wrong with attaching in's address, or "".
func unsafe(in evaluator.Input, d evaluator.Decision) string {
	ip := in.IPAddress
	switch {
	case !in.Network.Exists || !in.Network.IPAMEnabled:
		return "a network that is missing or has no pool"
	case d.Allocation == evaluator.AllocationAuto && in.Interface.IPAddressName != "":
		return "an Auto address for an interface naming a static one"
	case d.Allocation == evaluator.AllocationStatic && in.Interface.IPAddressName == "":
		return "a static address without a name"
	case !ip.Exists:
		return "a missing address"
	case !ip.Allocated:
		return "an unallocated address"
	case ip.NetworkRef.Kind != in.Interface.Type || ip.NetworkRef.Name != in.Interface.Name:
		return "an address on another network"
	case ip.Owner.UID != "" && ip.Owner.UID != in.VM.UID:
		return "another VM's address"
	case d.Allocation == evaluator.AllocationAuto && ip.Owner.UID != in.VM.UID:
		return "an Auto address the VM does not control"
	case d.Allocation == evaluator.AllocationStatic && in.Holders.Holder != "" && in.Holders.Holder != in.VM.Name:
		return "an address held by another VM"
	}
	return ""
}

var allocations = []string{"'Auto'", "'Static'", "'None'", "'Pass'",
	"interface.ipAddressName != '' ? 'Static' : 'Auto'", "network.ipamEnabled ? 'Auto' : 'Pass'",
	"ipAddress.allocated ? 'Static' : 'Auto'"}

// randomPolicies is one to three policies: a random allocation or none, some of the default's
// rules disabled by name, maybe a rule of their own, maybe Ignore with a failing condition,
// maybe Audit.
func randomPolicies(rng *rand.Rand, def *v1alpha1.ClusterIPAMPolicy) []*v1alpha1.ClusterIPAMPolicy {
	var out []*v1alpha1.ClusterIPAMPolicy
	for i := range 1 + rng.IntN(3) {
		p := layer(fmt.Sprintf("p%d", i), priority(int32(rng.IntN(5))))
		if rng.IntN(4) > 0 {
			allocation(allocations[rng.IntN(len(allocations))])(p)
		}
		for _, r := range def.Spec.SkipRules {
			if rng.IntN(3) > 0 {
				skipRule(r.Name, "false", r.Reason, "", "")(p)
			}
		}
		if rng.IntN(3) == 0 {
			skipRule("odd", "interface.index % 2 == 1", "Odd", "", "")(p)
		}
		if rng.IntN(4) == 0 {
			ignoreErrors(p)
			matchCondition("flaky", "vm.labels['team'] != ''")(p)
		}
		if rng.IntN(5) == 0 {
			audit(p)
		}
		if rng.IntN(2) == 0 {
			hotplug("change.kind == 'None'")(p)
		}
		if p.Spec.Allocation == nil && len(p.Spec.SkipRules) == 0 && p.Spec.Hotplug == nil {
			hotplug("true")(p)
		}
		out = append(out, p)
	}
	return out
}

func describe(ps []*v1alpha1.ClusterIPAMPolicy) string {
	s := ""
	for _, p := range ps {
		alloc := "-"
		if p.Spec.Allocation != nil {
			alloc = p.Spec.Allocation.Expression
		}
		s += fmt.Sprintf("%s[prio %d %s %s alloc %s, %d rules] ", p.Name, p.Spec.Priority, p.Spec.Mode,
			p.Spec.FailurePolicy, alloc, len(p.Spec.SkipRules))
	}
	return s
}

// randomInput is an interface in a random state of network, address, ownership and holders.
func randomInput(rng *rand.Rand) evaluator.Input {
	coin := func() bool { return rng.IntN(2) == 0 }
	in := pooledAuto()
	in.Interface.Index = int64(rng.IntN(4))
	in.Network.Exists, in.Network.Ready, in.Network.IPAMEnabled = rng.IntN(6) > 0, rng.IntN(6) > 0, rng.IntN(4) > 0
	if coin() {
		in = withStatic(in)
	}
	ip := &in.IPAddress
	ip.Exists, ip.Allocated = rng.IntN(5) > 0, rng.IntN(4) > 0
	if rng.IntN(5) == 0 {
		ip.NetworkRef = evaluator.Ref{Kind: "Network", Name: "lan"}
	}
	switch rng.IntN(5) {
	case 0:
		ip.Owner = evaluator.Owner{Name: "vm-b", UID: "uid-b"}
	case 1:
		ip.Owner = evaluator.Owner{}
	case 2: // e.g. the VM names its own Auto IPAddress as static
		ip.Owner = evaluator.Owner{Name: in.VM.Name, UID: in.VM.UID}
	}
	if rng.IntN(4) == 0 {
		ip.Type = "Auto"
	}
	if rng.IntN(4) == 0 {
		in.Holders = evaluator.Holders{VMs: []string{"vm-b"}, Holder: "vm-b"}
	}
	if rng.IntN(6) == 0 {
		ip.Reason = "NoFreeIPAddress"
	}
	if coin() {
		in.VM.Labels = map[string]string{"team": "a"}
	}
	return in
}

// withStatic makes in name the user's Static IPAddress "web".
func withStatic(in evaluator.Input) evaluator.Input {
	s := pooledStatic()
	in.Interface.IPAddressName, in.IPAddress = s.Interface.IPAddressName, s.IPAddress
	return in
}
