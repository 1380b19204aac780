package evaluator_test

import (
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A variable sees only the variables before it, at run time as in its type: found by
// FuzzCompileAndDecide, a variable whose expression was `variables` — the map of all of them,
// itself included — made the bounds check of its value resolve it again, and again, until
// the stack overflowed: a fatal error no recover can catch, which killed the process (the
// controller, or a dry run's server) for one admitted policy.
func TestAVariableCannotReachItself(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct {
		name string
		opts []policyOption
	}{
		{"its value is variables", []policyOption{variable("early", "'x'"), variable("all", "variables"),
			matchCondition("m", "variables.all.early == 'x'")}},
		{"a later one holds variables in a list", []policyOption{variable("early", "'x'"), variable("all", "variables"),
			variable("later", "[variables, variables]"), matchCondition("m", "variables.later[1].all.early == 'x'")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(setOf(t, c, newPolicy("p", tc.opts...)), pooledAuto())
			if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != "p" {
				t.Errorf("decision %s %q by %q, want p's Auto", d.Reason, d.Message, d.Provenance.Allocation)
			}
		})
	}
}

// A variable's expression sees the variables declared before it and no others, also through
// dyn(), which the type checker lets pass.
func TestAVariableSeesTheVariablesBeforeIt(t *testing.T) {
	c := newCompiler(t)
	p := newPolicy("p", variable("a", "1"), variable("b", "variables"), variable("c", "variables"),
		matchCondition("m", "has(dyn(variables.b).a) && !has(dyn(variables.b).b) && !has(dyn(variables.b).c) && "+
			"has(dyn(variables.c).b) && !has(dyn(variables.c).c) && has(dyn(variables).c)"))
	if d := decide(setOf(t, c, p), pooledAuto()); d.Provenance.Allocation != "p" {
		t.Errorf("decision %s %q, want p's: b sees a, c sees a and b, the condition all three", d.Reason, d.Message)
	}
}
