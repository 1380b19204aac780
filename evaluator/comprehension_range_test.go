package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A comprehension may iterate over at most Limits.ComprehensionRange (512) elements, by its
// range's derived bound: cel-go's cost tracker makes a comprehension's work grow with the
// square of its iterations while charging it linearly, and `lists.range(24996).all(i, true)`
// was admitted at 93,711 units for ~1 s of CPU (issue #15). The input lists (256 labels or
// holders), and two of them concatenated, fit; a stored expression keeps compiling.
func TestLongComprehensionsAreRefused(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct {
		expr, want string
	}{
		{"lists.range(12000).all(i, i >= 0) && vm.name == 'never'", "iterates over up to 12000 elements, more than the 512"},
		{"(holders.vms + holders.vms + ['x']).all(x, x != '')", "iterates over up to 513 elements"},
		{"lists.range(600).map(i, i).size() > 0", "iterates over up to 600 elements"},
		{"[1, 2].all(k, lists.range(1000).exists(i, i < 0))", "iterates over up to 1000 elements"},
	} {
		errs := compileRule(c, tc.expr)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: errors %v, want one naming %q", tc.expr, errs, tc.want)
		}
	}
	for _, expr := range []string{
		"lists.range(512).all(i, true)",
		"(holders.vms + holders.vms).all(x, x != '')",
		"vm.labels.all(k, k.startsWith('a'))",
	} {
		if errs := compileRule(c, expr); len(errs) > 0 {
			t.Errorf("%s: %v, want it admitted", expr, errs)
		}
	}
	long := newPolicy("p", skipRule("r", "lists.range(2000).all(i, true)", "R", "m", ""))
	if _, errs := c.Compile(long, long); len(errs) > 0 {
		t.Errorf("stored: %v, want a stored expression compiled as it was admitted", errs)
	}
	if _, errs := compilerWith(t, evaluator.Limits{ComprehensionRange: 4096}).Compile(long, nil); len(errs) > 0 {
		t.Errorf("with ComprehensionRange 4096: %v, want it admitted", errs)
	}
}

// `&&`, `||` and `?:` in a comprehension are charged, by the estimate and at run time:
// cel-go charges them 0, but its cost tracker searches a stack that grows with the
// iterations for each operand they drop, so that a body of 600 `true &&` terms over 512
// elements was admitted at ~4 units an iteration and took ~0.2 ms an iteration (issue #15;
// BenchmarkCostCalibration "logical-chain"). A macro's own accumulation (`__result__ && body`)
// is not charged again: the calibration measures it.
func TestLogicalNodesInComprehensionsAreCharged(t *testing.T) {
	c := newCompiler(t)
	chain := strings.TrimSuffix(strings.Repeat("true && ", 600), " && ")
	if errs := compileRule(c, "lists.range(512).all(i, "+chain+")"); len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
		t.Errorf("errors = %v, want the estimate to refuse 600 logical terms over 512 elements", errs)
	}
	in := pooledAuto()
	in.VM.Labels = map[string]string{}
	for i := range 256 {
		in.VM.Labels[strings.Repeat("k", 10)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "v"
	}
	cost := func(expr string) int64 {
		d := decide(setOf(t, c, newPolicy("p", skipRule("r", expr, "R", "m", ""))), in)
		if d.Reason == evaluator.ReasonPolicyError || d.Skip {
			t.Fatalf("%s: %s %s", expr, d.Reason, d.Message)
		}
		return d.Cost
	}
	one, three := cost("vm.labels.exists(k, k == 'a')"), cost("vm.labels.exists(k, k == 'a' || k == 'b' || k == 'c')")
	// Two more comparisons (2 units each: the ident and ==) and two `||` (2 each) on each of 256 labels.
	if three-one < 256*(2*2+2*2) {
		t.Errorf("cost with two more || terms = %d more, want at least %d: the `||` charged", three-one, 256*(2*2+2*2))
	}
}

// A literal inside a comprehension is charged each evaluation, unless it is a list or map of
// constants only, which cel-go's planner builds once: one non-constant element made
// `[1, 1, …, i]` evaluate every constant on every iteration for the literal's flat base
// cost (~15 µs a unit; issue #15).
func TestLiteralsInComprehensionsAreCharged(t *testing.T) {
	c := newCompiler(t)
	ones := strings.Repeat("1, ", 2490)
	for _, expr := range []string{
		"lists.range(489).exists(i, [" + ones + "i].size() == 0)",
		"lists.range(512).exists(i, {" + strings.Repeat("0: 1, ", 1) + "1: i}.size() == 0 && " + strings.TrimSuffix(strings.Repeat("i != 7 && ", 100), " && ") + ")",
	} {
		if errs := compileRule(c, expr); len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
			t.Errorf("%.60s…: errors = %v, want the estimate to refuse it", expr, errs)
		}
	}
	for _, expr := range []string{
		"vm.labels.exists(k, k in ['team', 'owner', 'tier'])",
		"lists.range(512).exists(i, [" + ones + "1].size() == 0)", // all constant: built once
	} {
		if errs := compileRule(c, expr); len(errs) > 0 {
			t.Errorf("%.60s…: %v, want it admitted", expr, errs)
		}
	}
}

// A read inside a comprehension is charged for the values pending beneath it: cel-go's cost
// tracker searches its whole value stack for the ID of every attribute it observes, and
// every element of a long literal is pending while the next is evaluated, so that
// `[i, i, …, 2,480 times]` over 38 elements took ~1.05 µs a unit, ~3× the calibration
// (issue #15, tester atk6 finding 3). Literals of up to 255 elements pay nothing more.
func TestReadsAboveLongLiteralsAreCharged(t *testing.T) {
	c := newCompiler(t)
	idents := func(n int) string { return strings.TrimSuffix(strings.Repeat("i, ", n), ", ") }
	if errs := compileRule(c, "lists.range(38).all(i, ["+idents(2480)+"].size() > 0)"); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "estimated worst-case cost") {
		t.Errorf("errors = %v, want the estimate to refuse 2,480 reads above each other over 38 elements", errs)
	}
	if errs := compileRule(c, "lists.range(512).all(i, ["+idents(100)+"].size() > 0)"); len(errs) > 0 {
		t.Errorf("100 reads in a literal over 512 elements: %v, want it admitted", errs)
	}
	cost := func(n int) int64 {
		d := decide(setOf(t, c, newPolicy("p", skipRule("r", "lists.range(8).all(i, ["+idents(n)+"].size() > 0)", "R", "m", ""))), pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError {
			t.Fatalf("%d reads: %s", n, d.Message)
		}
		return d.Cost
	}
	// The linear parts cancel but for the constant (~140 units): the reads above 256 pending
	// values, ~(436 - 2 × 46) units an iteration, 8 times, remain; half of it is asked.
	if got, want := cost(600)-2*cost(300), int64(8*(436-2*46)/2); got < want {
		t.Errorf("cost(600 reads) - 2 × cost(300) = %d, want at least %d: the stack searched by each read charged", got, want)
	}
}
