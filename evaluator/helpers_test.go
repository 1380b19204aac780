package evaluator_test

import (
	"testing"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// newCompiler returns a compiler with the default limits or fails the test.
func newCompiler(t testing.TB) *evaluator.Compiler {
	t.Helper()
	c, err := evaluator.NewCompiler(evaluator.Limits{})
	if err != nil {
		t.Fatalf("NewCompiler: %v", err)
	}
	return c
}

// mustCompile compiles p as a stored policy or fails the test with the errors.
func mustCompile(t testing.TB, c *evaluator.Compiler, p *v1alpha1.ClusterIPAMPolicy) *evaluator.Policy {
	t.Helper()
	compiled, errs := c.Compile(p, p)
	if len(errs) > 0 {
		t.Fatalf("Compile(%s): %v", p.Name, errs.ToAggregate())
	}
	return compiled
}

// defaultSet returns a Set with no installed policy: the built-in default decides.
func defaultSet(t testing.TB, c *evaluator.Compiler) *evaluator.Set {
	t.Helper()
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return evaluator.NewSet(nil, mustCompile(t, c, b))
}

// pooledAuto is an interface on a Ready ClusterNetwork with a pool, whose own Auto IPAddress
// is allocated: the happy path every case below varies.
func pooledAuto() evaluator.Input {
	return evaluator.Input{
		VM:        evaluator.VM{Name: "vm-a", Namespace: "ns", UID: "uid-a", Phase: "Running"},
		Interface: evaluator.Interface{Index: 1, Type: "ClusterNetwork", Name: "corp"},
		Network: evaluator.Network{Exists: true, Ready: true, IPAMEnabled: true,
			Pool: evaluator.Ref{Kind: "ClusterIPAddressPool", Name: "corp-pool"}},
		IPAddress: evaluator.IPAddress{Exists: true, Name: "vm-a-clusternetwork-corp", Type: "Auto",
			NetworkRef: evaluator.Ref{Kind: "ClusterNetwork", Name: "corp"}, Phase: "Allocated",
			Address: "10.0.0.5", Allocated: true, Owner: evaluator.Owner{Name: "vm-a", UID: "uid-a"}},
		Namespace: evaluator.Namespace{Name: "ns"},
	}
}

// pooledStatic is pooledAuto with ipAddressName set to the user's allocated Static IPAddress.
func pooledStatic() evaluator.Input {
	in := pooledAuto()
	in.Interface.IPAddressName = "web"
	in.IPAddress = evaluator.IPAddress{Exists: true, Name: "web", Type: "Static",
		NetworkRef: evaluator.Ref{Kind: "ClusterNetwork", Name: "corp"}, Phase: "Allocated",
		Address: "10.0.0.9", Allocated: true}
	return in
}
