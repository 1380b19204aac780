package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A comprehension iterates over at most Limits.ComprehensionRange (512) elements, checked on
// its range when it runs: cel-go's cost tracker makes a comprehension's work grow with the
// square of its iterations while charging it linearly (`lists.range(24996).all(i, true)` was
// charged 93,711 units for ~1 s of CPU, issue #15). Past it the expression fails with a
// PolicyError naming the bound; the input lists (256 labels or holders), and two of them
// concatenated, fit.
func TestLongComprehensionsFailAtRunTime(t *testing.T) {
	c := newCompiler(t)
	in := lotsOfHolders(256)
	for _, tc := range []struct {
		expr, want string
	}{
		{"lists.range(12000).all(i, i >= 0)", "a comprehension over 12000 elements, at most 512"},
		{"(holders.vms + holders.vms + ['x']).all(x, x != '')", "a comprehension over 513 elements"},
		{"lists.range(600).map(i, i).size() > 0", "a comprehension over 600 elements"},
		{"[1, 2].all(k, lists.range(1000).exists(i, i < 0))", "a comprehension over 1000 elements"},
	} {
		d := decide(setOf(t, c, newPolicy("p", skipRule("r", tc.expr, "R", "m", ""))), in)
		if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, tc.want) || d.DeadlineExceeded {
			t.Errorf("%s: decision %s %q, want a PolicyError naming %q", tc.expr, d.Reason, d.Message, tc.want)
		}
	}
	for _, expr := range []string{
		"lists.range(512).all(i, true)",
		"(holders.vms + holders.vms).all(x, x != '')",
		"vm.labels.all(k, k.startsWith('a'))",
	} {
		if d := decide(setOf(t, c, newPolicy("p", skipRule("r", expr, "R", "m", ""))), in); d.Reason == evaluator.ReasonPolicyError {
			t.Errorf("%s: %q, want it decided", expr, d.Message)
		}
	}
	long := newPolicy("p", skipRule("r", "lists.range(2000).all(i, true)", "R", "m", ""))
	if d := decide(setOf(t, compilerWith(t, evaluator.Limits{ComprehensionRange: 4096}), long), in); d.Reason != "R" {
		t.Errorf("with ComprehensionRange 4096: %s %q, want the rule to skip", d.Reason, d.Message)
	}
}
