package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// doublingPolicy has n variables, each the previous one concatenated with itself: CEL charges
// one unit per concatenation, but the last list holds 100·2ⁿ elements.
func doublingPolicy(n int) []policyOption {
	opts := []policyOption{variable("v0", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(i, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(j, i * j)).flatten()")}
	for i := 1; i <= n; i++ {
		opts = append(opts, variable(fmt.Sprintf("v%d", i), fmt.Sprintf("variables.v%d + variables.v%d", i-1, i-1)))
	}
	return append(opts, allocation(fmt.Sprintf("variables.v%d.size() > 0 ? 'Auto' : 'None'", n)))
}

// Formatting the variables for the trace is work on CEL values that CEL's cost accounting does
// not see: the controller must not do it at all, and the dry run must do it within bounds and
// pay for it. Before, sixteen doubling variables were formatted on every Decide (the
// controller's too), walking 6.5 million elements; now nothing formats them unless explained,
// and then within bounds.
func TestVariablesAreFormattedOnlyWhenExplainedAndBounded(t *testing.T) {
	c := newCompiler(t)
	// Ten doublings (102,400 elements; each `+` copies, charged by what it copies).
	if d := decide(setOf(t, c, newPolicy("p", doublingPolicy(10)...)), pooledAuto()); d.Allocation != evaluator.AllocationAuto {
		t.Errorf("ten doublings: %s %q, want Auto", d.Reason, d.Message)
	}
	set := setOf(t, c, newPolicy("p", doublingPolicy(3)...))
	plain := decide(set, pooledAuto())
	if plain.Allocation != evaluator.AllocationAuto || plain.Trace.Variables != nil {
		t.Fatalf("without Explain: allocation %q, variables %d, want Auto and no variables",
			plain.Allocation, len(plain.Trace.Variables))
	}
	explained := explain(set, pooledAuto())
	vars := explained.Trace.Variables["p"]
	if len(vars) != 4 {
		t.Fatalf("with Explain: %d variables, want 4", len(vars))
	}
	for name, v := range vars {
		if len(v) > 512+len("…") {
			t.Errorf("variable %s formatted to %d bytes, want at most 512 and a mark", name, len(v))
		}
	}
	if last := vars["v3"]; !strings.HasPrefix(last, "[0, 0, 0") || !strings.HasSuffix(last, "…") {
		t.Errorf("v3 = %.40q…, want the cut list", last)
	}
	if explained.Cost != plain.Cost {
		t.Errorf("cost with Explain %d, without %d: want the decision's cost either way", explained.Cost, plain.Cost)
	}
}

// Formatting draws on what the decision left of the interface budget; once it is spent,
// formatting stops: the values are cut, the decision stays.
func TestVariableFormattingStopsAtTheBudget(t *testing.T) {
	p := newPolicy("p", doublingPolicy(2)...)
	plain := decide(setOf(t, newCompiler(t), p), pooledAuto())
	c := compilerWith(t, evaluator.Limits{InterfaceCostBudget: plain.Cost + 40})
	d := explain(setOf(t, c, p), pooledAuto())
	if d.Allocation != evaluator.AllocationAuto {
		t.Fatalf("allocation %q (%s), want Auto", d.Allocation, d.Message)
	}
	if v := d.Trace.Variables["p"]["v2"]; !strings.HasSuffix(v, "…") || len(v) > 200 {
		t.Errorf("v2 = %q, want a value cut by the exhausted budget", v)
	}
}
