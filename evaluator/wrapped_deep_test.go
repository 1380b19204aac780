package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A value that wraps another — optional.of(x) — is compared by comparing what it wraps, so
// the deep operations walk through it: at run time each such operation is charged, and
// checked against the per-call limit, by the deep size of what the wrappers hold. Before,
// deepSize counted an optional as one scalar node: `optional.of(m) in [optional.of(m)]` on a
// 134-million-element m was charged 5 units and ran ~8 s, uninterruptibly (issue #15).
// Class: a wrapper value the deep walk does not see through.
func TestWrappedDeepOperationsAreChargedByDeepSize(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 2000, PerCallCostLimit: 2000})
	e := "[[" + strings.Repeat("1, ", 63) + "1]]"
	for range 5 {
		e += ".map(x, [x, x])"
	}
	e = hidden(e)                  // 2,112 nodes the estimate does not see (a stored expression)
	o := "optional.of(" + e + ")"  // the same behind an optional
	oo := "optional.of(" + o + ")" // and behind two
	// `==` on optionals themselves is refused by cel-go's estimate (it saturates), so only
	// optionals inside lists and maps reach the run time (deep_internal_test.go has the rest).
	for _, expr := range []string{
		o + " in [" + o + "]",
		oo + " in [optional.none(), " + oo + "]",
		"[" + o + "].includes(" + o + ")",
		"[" + o + "].indexOf(" + o + ") == 0",
		"[" + o + "].lastIndexOf(" + o + ") == 0",
		"[" + o + ", " + o + "].distinct().size() == 1",
		"sets.contains([" + o + "], [" + o + "])",
		"sets.equivalent([" + o + "], [" + o + "])",
		"sets.intersects([" + o + "], [" + o + "])",
		"[" + o + "] == [" + o + "]",
		"{'a': " + o + "} == {'a': " + o + "}",
	} {
		t.Run("", func(t *testing.T) {
			p := newPolicy("wrapped", allocation("("+expr+") ? 'Auto' : 'None'"))
			d := decide(setOf(t, c, p), pooledAuto())
			if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "cost limit") ||
				strings.Contains(d.Message, "deadline") {
				t.Errorf("%s: decision %q %q %q, want a PolicyError naming the cost limit", expr, d.Allocation, d.Reason, d.Message)
			}
		})
	}
}

// The tester's reproductions (atk7 findings 31, 34–36): a variable holding a huge nested value
// built cheaply by reusing one inner list, compared behind an optional. Each is now refused
// when written, or, admitted, fails closed on cost before the comparison runs — never runs
// into the deadline. Before, each was admitted and charged 5–16 units for 0.12 s to ~8 s of
// CPU.
func TestWrappedReproductionsAreRefusedOrChargedTheirDeepSize(t *testing.T) {
	c := newCompiler(t)
	inner := variable("inner", "lists.range(512)")
	m := variable("m", "lists.range(512).map(i, variables.inner)")
	m2 := variable("m2", "lists.range(8).map(i, variables.m)")
	o := "optional.of(variables.m2)"
	for _, expr := range []string{
		o + " in [" + o + "]",
		"sets.contains([" + o + "], [" + o + "])",
		"[" + o + "].indexOf(" + o + ") == 0",
		"optional.of(lists.range(512).map(i, lists.range(100))) in [optional.of(lists.range(512).map(i, lists.range(100)))]",
	} {
		p := newPolicy("p", inner, m, m2, allocation("("+expr+") ? 'Auto' : 'None'"))
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			if !strings.Contains(errs.ToAggregate().Error(), "per-call limit") {
				t.Errorf("%s: refused with %v, want the per-call limit named", expr, errs)
			}
			continue
		}
		d := decide(setOf(t, c, p), pooledAuto())
		if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "cost limit") ||
			strings.Contains(d.Message, "deadline") {
			t.Errorf("%s: admitted, then decision %q %q %q, want a PolicyError naming the cost limit", expr, d.Allocation, d.Reason, d.Message)
		}
	}
}

// Realistic optionals — a label looked up with a default, optionals of scalars — are not
// deep operations: they are admitted and decide as before, on the fullest input. (`==` on two
// optionals stays refused by cel-go's own estimate, which saturates on an optional's size.)
func TestOptionalsOfScalarsStayCheap(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"vm.labels[?'x'].orValue('') == ''",
		"optional.of(1) in [optional.of(1), optional.none()]",
		"vm.labels[?'x'].orValue('') in ['', 'a']",
	} {
		p := newPolicy("p", allocation("("+expr+") ? 'Auto' : 'None'"))
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			t.Errorf("%s: refused: %v", expr, errs)
			continue
		}
		if d := decide(setOf(t, c, p), fullInput(pooledAuto())); d.Allocation != evaluator.AllocationAuto {
			t.Errorf("%s: decision %q %q %q, want Auto", expr, d.Allocation, d.Reason, d.Message)
		}
	}
}

// An object is compared by reflect.DeepEqual of its Go value, which walks the lists and maps
// it holds: the deep operations count its parts. Before, an object counted one node, so two
// Holders a policy built around a 1,000-name list compared inside a list were charged a few
// units for every name walked.
func TestObjectsInDeepOperationsAreChargedByDeepSize(t *testing.T) {
	c := newCompiler(t)
	a := variable("a", "lists.range(50).map(i, string(i))")
	b := variable("b", strings.Repeat("variables.a + ", 9)+"variables.a")
	names := variable("l", "variables.b + variables.b") // 1,000 names: an object in a variable holds up to 1,024
	h1 := variable("h1", "evaluator.Holders{vms: variables.l}")
	h2 := variable("h2", "evaluator.Holders{vms: variables.l}")
	cost := func(expr string) int64 {
		d := decide(setOf(t, c, newPolicy("objects", a, b, names, h1, h2, allocation("("+expr+") ? 'Auto' : 'None'"))), pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError {
			t.Fatalf("%s: %s", expr, d.Message)
		}
		return d.Cost
	}
	control := cost("[variables.h1] == []") // compares nothing
	for _, expr := range []string{
		"[variables.h1] == [variables.h2]",
		"variables.h1 in [variables.h2]",
		"optional.of(variables.h1) in [optional.of(variables.h2)]",
	} {
		if got := cost(expr) - control; got < 1000 {
			t.Errorf("%s: charged %d more than comparing nothing, want at least the 1,000 names walked", expr, got)
		}
	}
}
