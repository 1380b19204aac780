package evaluator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// twoAnnotations is pooledAuto with annotations a and b of n characters, equal but for
// their last one (so that comparing them walks them whole).
func twoAnnotations(n int) evaluator.Input {
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"a": strings.Repeat("k", n-1) + "a", "b": strings.Repeat("k", n-1) + "b"}
	return in
}

// `x in list` compares x with each element, walking equal-length strings, but was charged
// one unit per element whatever their length: one admitted rule on a 262,000-character
// annotation spent 611 ms for 146,833 units (issue #15, atk15b finding 1). It is now
// charged the characters it may compare (compare_charges.go). Class: a comparison whose
// work grows with string length charged per element.
func TestInListChargesTheStringsItCompares(t *testing.T) {
	const n, loops = 60_000, 100
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e9, PerCallCostLimit: 1e9,
		InterfaceCostBudget: 1e9, TrialCostBudget: 1e9, Deadline: 30 * time.Second})
	s := setOf(t, c, newPolicy("p", skipRule("r",
		"lists.range(100).exists(i, vm.annotations['a'] in [vm.annotations['b'], vm.annotations['b']])", "R", "", "")))
	short, long := decide(s, twoAnnotations(10)), decide(s, twoAnnotations(n))
	for _, d := range []evaluator.Decision{short, long} {
		if d.Reason == evaluator.ReasonPolicyError || d.Skip {
			t.Fatalf("decision = %+v, want the rule evaluated to false", d)
		}
	}
	if want := int64(loops * 2 * (n / 1024)); long.Cost-short.Cost < want {
		t.Errorf("cost on %d characters = %d, on 10 = %d: want at least %d more, the comparisons' work", n, long.Cost, short.Cost, want)
	}
}

// The estimate charges `in` a flat list so too: the tester's rules (300 copies of an
// annotation searched 290 times) are refused when written, and one searching a list of
// short literals stays admitted.
func TestInListEstimateChargesTheStrings(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"lists.range(290).exists(j, variables.x in variables.l)",
		"variables.x in variables.l + variables.l + variables.l + variables.l",
	} {
		t.Run(expr, func(t *testing.T) {
			_, errs := c.Compile(newPolicy("p", variable("v", "vm.annotations[?'x'].orValue('')"),
				variable("x", "variables.v.substring(1) + 'b'"), variable("l", "lists.range(300).map(i, variables.v)"),
				skipRule("r", expr, "R", "", "")), nil)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
				t.Errorf("Compile errors = %v, want the rule's estimate to refuse it", errs)
			}
		})
	}
	if _, errs := c.Compile(newPolicy("p", skipRule("r",
		"vm.annotations[?'x'].orValue('') in ['a', 'b', 'c'] || vm.name in [vm.namespace, 'x']", "R", "", "")), nil); len(errs) != 0 {
		t.Errorf("Compile errors = %v, want `in` short lists admitted", errs)
	}
}

// What the estimate admits on the declared largest annotation ends within the cost limits.
func TestInListWithinItsLimits(t *testing.T) {
	in := twoAnnotations(256 << 10)
	s := setOf(t, newCompiler(t), newPolicy("p", skipRule("r",
		"lists.range(50).exists(i, vm.annotations['a'] in [vm.annotations['b'], vm.annotations['b']])", "R", "", "")))
	if d := decide(s, in); d.Reason == evaluator.ReasonPolicyError || d.Skip || d.Cost < 50*2*256 {
		t.Errorf("decision = %s %q at %d units, want the rule evaluated to false at over %d units", d.Reason, d.Message, d.Cost, 50*2*256)
	}
}

// Equality of flat lists and maps compares their strings pairwise, but cel-go charged a
// tenth of a unit per element whatever their length (~1 µs a unit measured on 262,000-
// character strings). It is charged the characters it may compare, and estimated so.
func TestFlatEqualityChargesTheStringsItCompares(t *testing.T) {
	const n = 60_000
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e9, PerCallCostLimit: 1e9,
		InterfaceCostBudget: 1e9, TrialCostBudget: 1e9, Deadline: 30 * time.Second})
	for _, expr := range []string{
		"lists.range(100).exists(i, [vm.annotations['a'], vm.annotations['a']] == [vm.annotations['b'], vm.annotations['b']])",
		"lists.range(100).exists(i, [vm.annotations['a'], vm.annotations['a']] != [vm.annotations['a'], vm.annotations['b']] && i < 0)",
		"lists.range(100).exists(i, {'k': vm.annotations['a'], 'l': vm.annotations['a']} == {'k': vm.annotations['b'], 'l': vm.annotations['b']})",
	} {
		t.Run(expr, func(t *testing.T) {
			s := setOf(t, c, newPolicy("p", skipRule("r", expr, "R", "", "")))
			short, long := decide(s, twoAnnotations(10)), decide(s, twoAnnotations(n))
			for _, d := range []evaluator.Decision{short, long} {
				if d.Reason == evaluator.ReasonPolicyError || d.Skip {
					t.Fatalf("decision = %+v, want the rule evaluated to false", d)
				}
			}
			if want := int64(100 * (n / 1024)); long.Cost-short.Cost < want {
				t.Errorf("cost on %d characters = %d, on 10 = %d: want at least %d more, the comparisons' work", n, long.Cost, short.Cost, want)
			}
		})
	}
	for _, expr := range []string{
		"lists.range(3000).exists(i, variables.l == variables.l2)",
		"lists.range(3000).exists(i, {'k': variables.v} == {'k': variables.v + 'x'})",
	} {
		_, errs := newCompiler(t).Compile(newPolicy("p", variable("v", "vm.annotations[?'x'].orValue('')"),
			variable("l", "[variables.v, variables.v]"), variable("l2", "[variables.v, variables.v + 'b']"),
			skipRule("r", expr, "R", "", "")), nil)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
			t.Errorf("%s: Compile errors = %v, want the rule's estimate to refuse it", expr, errs)
		}
	}
}

// `==` of two flat lists is charged a unit an element compared, as `x in list` is: it was
// charged a tenth of a unit an element, while comparing two lists of 960 ints and the
// deep-size check before it took ~0.6 µs an element (issue #15, tester atk6).
func TestFlatListEqualityChargesItsElements(t *testing.T) {
	c := newCompiler(t)
	cost := func(call string) int64 {
		s := setOf(t, c, newPolicy("p", variable("l", "lists.range(500)"),
			skipRule("r", "["+call+", false][1]", "R", "m", "")))
		d := decide(s, pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError || d.Skip {
			t.Fatalf("%s: %s %s", call, d.Reason, d.Message)
		}
		return d.Cost
	}
	if got := cost("variables.l == variables.l") - cost("variables.l.size() == 0"); got < 500 {
		t.Errorf("comparing 500 elements cost %d more than their size(), want at least 500: a unit an element", got)
	}
}

// cel-go's optimizer plans `x in [constants]` as a set lookup (evalSetMembership), a node no
// cost tracker sees: it was charged nothing, and hashed x, so a rule testing a 250,000-
// character annotation against constant lists 6,000 times spent ~1.6 µs a unit (issue #15,
// tester atk7 finding 5). The call stays a call the tracker charges, as `in` any flat list:
// a unit an element and the characters it may compare. Class: a node kind no tracker sees.
func TestInConstantListIsCharged(t *testing.T) {
	c := newCompiler(t)
	cost := func(list string) int64 {
		s := setOf(t, c, newPolicy("p", skipRule("r",
			"lists.range(100).exists(i, vm.name in "+list+" && i < 0)", "R", "", "")))
		d := decide(s, pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError || d.Skip {
			t.Fatalf("%s: decision = %s %q, want the rule evaluated to false", list, d.Reason, d.Message)
		}
		return d.Cost
	}
	constants := "['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p']"
	if got := cost(constants) - cost("[]"); got < 100*16 {
		t.Errorf("`in` a list of 16 constants, 100 times, cost %d more than `in []`: want at least %d, a unit an element", got, 100*16)
	}
}
