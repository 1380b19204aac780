package evaluator_test

import (
	"strings"
	"testing"

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

// hidden is e behind optional.of(…).value(), whose deep size (and size) the static estimate
// does not derive: a stored expression (refused when new) reaches the run-time checks with it.
func hidden(e string) string { return "optional.of(" + e + ").value()" }

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
		e + " != []",
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
	_, errs := c.Compile(newPolicy("p", allocation("("+hidden("vm.labels.map(k, [k])")+" == []) ? 'Auto' : 'None'")), nil)
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
