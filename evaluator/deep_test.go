package evaluator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// doubling is [[1, 2]] nested k times by .map(x, [x, x]): every step reuses the inner list
// twice, so the value holds 2^k elements for a charged cost of ~k (issue #15).
func doubling(k int) string {
	e := "[[1, 2]]"
	for range k {
		e += ".map(x, [x, x])"
	}
	return e
}

// hidden is the list e behind e.sortBy(x, 0) (the same elements), whose deep size (and size)
// the static estimate does not derive: a stored expression (refused when new) reaches the
// run-time checks with it. (The estimate derives bounds through optional.of(e).value(),
// which hid them before.)
func hidden(e string) string { return e + ".sortBy(x, 0)" }

// An operation that walks a value deeply is bounded by the value's deep size, not by its
// top-level size: on a value beyond the per-call limit it fails closed on cost, before it
// runs, where the static estimate could not see the value's deep size (a stored expression).
// Before, each of these was admitted, charged a few hundred units and ran until the deadline
// abandoned it (z == z on 2^20 elements: 0.34 s of CPU).
func TestDeepOperationsAreChargedByDeepSize(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 2000, PerCallCostLimit: 2000})
	e := "[[" + strings.Repeat("1, ", 63) + "1]]"
	for range 5 {
		e += ".map(x, [x, x])"
	}
	e = "[" + hidden(e) + "]" // one entry of 7 list levels, 2,113 nodes
	for _, expr := range []string{
		e + " == " + e,
		e + " != [[]]", // of one size: != [] answers on the sizes, walking nothing
		"[] in " + e,
		e + ".distinct().size() == 1",
		e + ".flatten().size() == 1",
		e + ".includes([])",
		e + ".indexOf([]) == 0",
		e + ".lastIndexOf([]) == 0",
		"sets.contains(" + e + ", [])",
		"sets.equivalent(" + e + ", [])",
		"sets.intersects(" + e + ", [])",
	} {
		p := newPolicy("chain", allocation("("+expr+") ? 'Auto' : 'None'"))
		d := decide(setOf(t, c, p), pooledAuto())
		if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "cost limit") ||
			strings.Contains(d.Message, "deadline") {
			t.Errorf("%s: decision %q %q, want a PolicyError naming the cost limit", expr, d.Reason, d.Message)
		}
	}
}

// The same operations on a small nested value decide as before.
func TestDeepOperationsOnSmallNestedValuesDecide(t *testing.T) {
	c := newCompiler(t)
	e := doubling(3)
	for _, expr := range []string{
		e + ".exists(z, z == z)",
		e + ".exists(z, z in " + e + ")",
		e + ".flatten().size() == 2",
		e + ".indexOf(" + e + "[0]) == 0",
		"sets.equivalent(" + e + ", " + e + ")",
	} {
		p := newPolicy("chain", allocation("("+expr+") ? 'Auto' : 'None'"))
		if d := decide(setOf(t, c, p), pooledAuto()); d.Allocation != evaluator.AllocationAuto {
			t.Errorf("%s: decision %q %q %q, want Auto", expr[len(e):], d.Allocation, d.Reason, d.Message)
		}
	}
}

// `in` a map looks one key up, whatever the map's values hold: it is neither refused nor
// charged by them.
func TestInAMapIsNotWalked(t *testing.T) {
	c := newCompiler(t)
	p := newPolicy("chain", allocation("('a' in {'a': "+doubling(5)+"}) ? 'Auto' : 'None'"))
	if d := decide(setOf(t, c, p), pooledAuto()); d.Allocation != evaluator.AllocationAuto {
		t.Errorf("decision %q %q %q, want Auto", d.Allocation, d.Reason, d.Message)
	}
}

// The pairwise operations compare every element of one operand with every element of the
// other (sets.contains, sets.intersects, sets.equivalent both ways) or with those kept so far
// (distinct()), each comparison walking the elements deeply, and are charged that work
// (issue #15). Before, a nested call was charged the deep size of its operands (~7,200 for
// sets.intersects below, whose no-overlap case compares 60 × 60 lists of 60 nodes, ~216,000
// node comparisons), and a flat one was charged 1 (the library's m × n charge was lost under
// deep.go's own): 1,000 × 1,000 comparisons for one unit.
func TestPairwiseOperationsAreChargedTheirPairs(t *testing.T) {
	// a and b: 60 lists of 59 ints that differ only at their last element, none shared.
	a := "lists.range(60).map(i, lists.range(59).map(j, j == 58 ? i : j))"
	b := "lists.range(60).map(i, lists.range(59).map(j, j == 58 ? -1 : j))"
	flat := "lists.range(1000)"
	const deepA = 1 + 60*60 // deep size of a (and b)
	cases := []struct {
		name, expr, operands string
		atLeast              int64 // the charge of the call alone is at least
	}{
		{"sets.intersects nested", "sets.intersects(" + a + ", " + b + ")", a + ", " + b, 60 * deepA},
		{"sets.contains nested", "sets.contains(" + b + ", " + a + ")", b + ", " + a, 60 * deepA},
		{"sets.equivalent nested", "sets.equivalent(" + a + ", " + a + ".map(x, x))", a + ", " + a + ".map(x, x)", 2 * 60 * deepA},
		{"distinct nested", a + ".distinct().size() == 1", a, 60 * deepA},
		{"sets.intersects flat", "sets.intersects(" + flat + ", " + flat + ".map(i, -i - 1))", flat + ", " + flat + ".map(i, -i - 1)", 1000 * 1000},
		{"distinct flat", flat + ".distinct().size() == 1", flat, 2 * 1000 * 1000},
	}
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e12, PerCallCostLimit: 1e12,
		InterfaceCostBudget: 1e12, TrialCostBudget: 1e12, ComprehensionRange: 1e12, Deadline: time.Minute})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The operands built alone: what the expression costs besides the call.
			base := decide(setOf(t, c, newPolicy("p", skipRule("r", "size(["+tc.operands+"]) < 0", "R", "", ""))), pooledAuto())
			d := decide(setOf(t, c, newPolicy("p", skipRule("r", tc.expr, "R", "", ""))), pooledAuto())
			if d.Reason == evaluator.ReasonPolicyError || base.Reason == evaluator.ReasonPolicyError {
				t.Fatalf("decisions %+v, %+v; want no PolicyError", base, d)
			}
			// The baseline's list literal costs a few units the call's expression does not.
			if got := d.Cost - base.Cost; got+20 < tc.atLeast {
				t.Errorf("call charged %d (%d - %d for its operands), want at least %d", got, d.Cost, base.Cost, tc.atLeast)
			}
		})
	}
}

// The value types of the Kubernetes libraries hold no list or map: a variable holding a
// Quantity, URL, IP or CIDR, alone or in a literal list or map, is compared as one node.
// Before, a Quantity's or URL's variable was "nested lists and maps … no size" to == and refused.
func TestLibraryValuesInVariablesCompare(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range [][2]string{
		{"quantity(vm.labels[?'size'].orValue('1Gi'))", "variables.q == quantity('1Gi')"},
		{"url('https://a')", "variables.q != url('https://b')"},
		{"[quantity('1Gi')]", "variables.q == [quantity('1Gi')]"},
		{"{'a': url('https://a')}", "variables.q == {'a': url('https://a')}"},
		{"cidr('10.0.0.0/8')", "variables.q == cidr('10.0.0.0/8')"},
	} {
		if _, errs := c.Compile(newPolicy("p", variable("q", tc[0]), skipRule("r", tc[1], "R", "m", "")), nil); len(errs) > 0 {
			t.Errorf("%s with q = %s: %v, want it to compile", tc[1], tc[0], errs)
		}
	}
}
