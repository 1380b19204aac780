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
