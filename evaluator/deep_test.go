package evaluator_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
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

// The estimate charges what the run time charges a deep operation, the deep size of its
// operands, derived from how the expression builds them (issue #15): an operation on a
// computed nested value that can exceed the per-call limit on an input within its bounds is
// refused when written, naming the operation; one that is admitted decides without a cost
// error on the fullest input. Before, `e.exists(z, [z] == e)` for a variable e of three
// doublings of the labels was estimated at a few thousand units, admitted, and charged
// ~990,000 at run time on 256 labels: a PolicyError on every such VM.
func TestDeepOperationsOnComputedValuesAreEstimated(t *testing.T) {
	c := newCompiler(t)
	chain := variable("e", "vm.labels.map(k, [k, k]).map(x, [x, x]).map(y, [y, y])")
	e := "variables.e"
	refused := []string{
		e + ".exists(z, [z] == " + e + ")",
		e + ".exists(z, [z] != " + e + ")",
		e + ".exists(z, [z] in [" + e + "])",
		e + ".exists(z, sets.intersects([z], " + e + "))",
		e + ".exists(z, sets.equivalent([z], " + e + "))",
		e + ".exists(z, (" + e + " + [z]).distinct().size() > 0)",
		e + ".exists(z, (" + e + " + [z]).flatten().size() > 0)",
		e + ".exists(z, (" + e + " + [z]).includes(z))",
		e + ".exists(z, (" + e + " + [z]).indexOf(z) < 0)",
	}
	for _, expr := range refused {
		_, errs := c.Compile(newPolicy("p", chain, allocation("("+expr+") ? 'Auto' : 'None'")), nil)
		if len(errs) != 1 || errs[0].Field != "spec.allocation.expression" || !strings.Contains(errs[0].Error(), "per-call limit") {
			t.Errorf("%s: errors %v, want one at spec.allocation.expression saying it exceeds the per-call limit", expr, errs)
		}
	}
	// The error names the operation when it is what exceeds the limit.
	if _, errs := c.Compile(newPolicy("p", chain, allocation("("+refused[0]+") ? 'Auto' : 'None'")), nil); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "== at 1:") || !strings.Contains(errs[0].Error(), "nested elements") {
		t.Errorf("errors %v, want one naming == and the nested elements it walks", errs)
	}
	for _, expr := range append(refused,
		e+" == "+e, "["+e+"] != []", "sets.contains("+e+", "+e+")", e+".flatten().size() > 0",
		"vm.labels.map(k, [k, vm.labels[k]]).exists(p, p == ['a', 'b'])",
		"vm.labels.map(k, [k, vm.labels[k]]).exists(p, p in [['a', 'b']])",
		"sets.contains(vm.labels.map(k, [k]), [['a']])",
	) {
		p := newPolicy("p", chain, allocation("("+expr+") ? 'Auto' : 'None'"))
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			continue
		}
		if d := decide(setOf(t, c, p), fullInput(pooledAuto())); d.Reason == evaluator.ReasonPolicyError {
			t.Errorf("%s: admitted, then %q %q on an input within its bounds", expr, d.Reason, d.Message)
		}
	}
}

// A deep operation on a nested value whose deep size the estimate cannot derive is refused
// in a new expression, naming the operation and why.
func TestDeepOperationsOnUnboundedValuesAreRefused(t *testing.T) {
	c := newCompiler(t)
	_, errs := c.Compile(newPolicy("p", allocation("("+hidden("[[vm.name], [vm.uid]]")+" == []) ? 'Auto' : 'None'")), nil)
	if len(errs) != 1 || errs[0].Field != "spec.allocation.expression" || !strings.Contains(errs[0].Error(), "== at 1:") ||
		!strings.Contains(errs[0].Error(), "no size the estimate can derive") {
		t.Errorf("errors %v, want one at spec.allocation.expression naming == and why", errs)
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
		InterfaceCostBudget: 1e12, TrialCostBudget: 1e12, Deadline: time.Minute})
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

// The estimate charges the pairwise operations what the run time does (issue #15): one
// whose comparisons can exceed the per-call limit on an input within its bounds is refused
// when written; one that is admitted decides without a cost error on the fullest input.
// Before, sets.intersects of two lists built from the 256 labels was estimated at their
// sizes' product plus their deep sizes (~67,000), admitted, and charged ~131,000 at run
// time: a PolicyError on every such VM.
func TestPairwiseOperationsAreEstimated(t *testing.T) {
	c := newCompiler(t)
	singles := "vm.labels.map(k, [k])" // 256 lists of one label: deep size 513
	literal := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf("['%d']", i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	refused := []string{
		"sets.intersects(" + singles + ", vm.labels.map(k, [k, 'x']))",
		"sets.contains(" + singles + ", vm.labels.map(k, [k, 'x']))",
		"sets.equivalent(" + singles + ", " + singles + ")",
		singles + ".distinct().size() > 0",
		"vm.labels.map(k, [k, k, k, k]).distinct().size() > 0",
	}
	admitted := []string{
		"sets.intersects(" + singles + ", [['a'], ['b']])",
		"sets.contains(" + singles + ", " + literal(60) + ")",
		singles + ".exists(p, sets.contains(p, ['a']))",
		literal(60) + ".distinct().size() == 60",
	}
	edge := []string{ // either, but never admitted to fail
		"sets.contains(" + singles + ", " + literal(90) + ")",
		"sets.contains(" + singles + ", " + literal(110) + ")",
		"sets.intersects(" + literal(100) + ", " + singles + ")",
		"sets.equivalent(" + singles + ", " + literal(45) + ")",
		literal(150) + ".distinct().size() == 150",
		literal(170) + ".distinct().size() == 170",
		"vm.labels.map(k, [k]).filter(p, p[0].startsWith('k')).distinct().size() > 0",
	}
	compile := func(expr string) (*evaluator.Policy, *v1alpha1.ClusterIPAMPolicy, error) {
		p := newPolicy("p", allocation("("+expr+") ? 'Auto' : 'None'"))
		compiled, errs := c.Compile(p, nil)
		return compiled, p, errs.ToAggregate()
	}
	for _, expr := range refused {
		if _, _, err := compile(expr); err == nil || !strings.Contains(err.Error(), "per-call limit") {
			t.Errorf("%s: error %v, want it refused for exceeding the per-call limit", expr, err)
		}
	}
	for _, expr := range append(admitted, edge...) {
		compiled, p, err := compile(expr)
		if compiled == nil || err != nil {
			if slices.Contains(admitted, expr) {
				t.Errorf("%s: refused (%v), want it admitted", expr, err)
			}
			continue
		}
		if d := decide(setOf(t, c, p), fullInput(pooledAuto())); d.Reason == evaluator.ReasonPolicyError {
			t.Errorf("%s: admitted, then %q %q on an input within its bounds", expr, d.Reason, d.Message)
		}
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
