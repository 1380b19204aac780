package evaluator_test

import (
	"strings"
	"testing"
)

// A policy may not build an object of the input's types (evaluator.VM{…}, evaluator.Holders{…}):
// building one converts every element of its list and map fields for a constant charge, and
// eight rules building evaluator.VM{labels: m} over 512 iterations ran into the deadline
// (issue #15, tester atk8 finding 2). The types exist for the input; a policy reads them.
// A stored expression keeps compiling.
func TestPoliciesDoNotBuildObjects(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"evaluator.VM{name: 'a'}.name == vm.name",
		"lists.range(4).all(i, evaluator.Holders{vms: holders.vms}.vms.size() >= 0)",
		"[evaluator.Interface{}].size() == 1",
	} {
		errs := compileRule(c, expr)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "may not build objects") {
			t.Errorf("%s: errors %v, want one saying policies may not build objects", expr, errs)
		}
	}
	p := newPolicy("p", skipRule("r", "evaluator.VM{name: 'a'}.name == vm.name", "R", "m", ""))
	if _, errs := c.Compile(p, p); len(errs) > 0 {
		t.Errorf("stored: %v, want a stored expression compiled as it was admitted", errs)
	}
}
