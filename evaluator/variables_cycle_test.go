package evaluator_test

import (
	"strings"
	"testing"
)

// `variables` may only be read by name. Found by FuzzCompileAndDecide: a variable whose
// expression was `variables` — the map of all of them, itself included — made the bounds check
// of its value resolve it again without end until the stack overflowed, a fatal error no
// recover catches, which killed the process (the controller, or a dry run's server) for one
// admitted policy; with the run-time views that fixed that, twenty variables each holding
// `variables` still made the check walk 2^20 views, uncharged, past the deadline. Refused
// as new and as stored expressions: a stored one would crash the controller as well.
func TestVariablesUsedWholeAreRefused(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct {
		name string
		opts []policyOption
	}{
		{"a variable's value", []policyOption{variable("early", "'x'"), variable("all", "variables")}},
		{"in a list", []policyOption{variable("early", "'x'"), variable("all", "[variables, variables]")}},
		{"in a map", []policyOption{variable("early", "'x'"), variable("all", "{'a': variables}")}},
		{"through dyn()", []policyOption{variable("early", "'x'"), matchCondition("m", "dyn(variables).all(v, true)")}},
		{"an optional select", []policyOption{variable("early", "'x'"), matchCondition("m", "variables.?early.hasValue()")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPolicy("p", tc.opts...)
			for mode, stored := range map[string]bool{"new": false, "stored": true} {
				old := p
				if !stored {
					old = nil
				}
				_, errs := c.Compile(p, old)
				if !strings.Contains(errs.ToAggregate().Error(), "`variables` may only be read by name") {
					t.Errorf("%s: errors %v, want `variables` used whole refused", mode, errs)
				}
			}
		})
	}
	// Read by name, and tested for presence, it is fine.
	p := newPolicy("p", variable("early", "'x'"), variable("later", "variables.early + 'y'"),
		matchCondition("m", "has(variables.later) && variables.later == 'xy'"))
	if d := decide(setOf(t, c, p), pooledAuto()); d.Provenance.Allocation != "p" {
		t.Errorf("decision %s %q, want p's", d.Reason, d.Message)
	}
}
