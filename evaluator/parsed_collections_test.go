package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A semver or URL compared inside a collection (`[s] == [s]`, `s in [t]`, `sets.*`, `distinct`)
// is compared in full — every pre-release identifier, the whole URL re-serialized — but was
// charged as a scalar: `[s] == [s]` over 400 iterations on a semver of 120,000 identifiers ran
// at ~31 µs a unit, and one policy ran into the deadline (issue #15, tester atk8 finding 1).
// Both the run time and the estimate count the value's parts (a semver's grow with its text);
// comparing two values directly keeps its own charge (parsed_charges.go).
func TestParsedValuesInCollectionsAreChargedByTheirParts(t *testing.T) {
	c := newCompiler(t)
	sv := variable("s", "semver(vm.annotations[?'v'].orValue('1.0.0'))")
	u := variable("u", "url(vm.annotations[?'u'].orValue('https://a'))")
	for _, expr := range []string{
		"lists.range(64).all(i, [variables.s] == [variables.s])",
		"lists.range(64).all(i, variables.s in [variables.s])",
		"lists.range(64).all(i, sets.equivalent([variables.s], [variables.s]))",
		"lists.range(64).all(i, [variables.s].distinct().size() == 1)",
	} {
		_, errs := c.Compile(newPolicy("p", sv, u, skipRule("r", expr, "R", "m", "")), nil)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "exceeds the per-call limit") {
			t.Errorf("%s: errors %v, want the estimate to refuse it", expr, errs)
		}
	}
	for _, expr := range []string{
		"variables.s == semver('1.2.3')",
		"semver('1.2.3') in [semver('1.2.3'), semver('2.0.0-rc.1')]",
		"[variables.u].distinct().size() == 1",
	} {
		if _, errs := c.Compile(newPolicy("p", sv, u, skipRule("r", expr, "R", "m", "")), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want it admitted", expr, errs)
		}
	}
	// Stored, the run time charges the parts: one semver of 509 pre-release identifiers (the
	// most maxSemverLength's 1,024 characters hold) in a list compared with itself costs
	// hundreds of units, not one.
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"v": "1.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 509), ".")}
	p := newPolicy("p", skipRule("r", "[semver(vm.annotations['v'])] == [semver(vm.annotations['v'])]", "R", "m", ""))
	// Limits that admit anything: the charge, not the estimate, is under test.
	big := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e7, PerCallCostLimit: 1e7, InterfaceCostBudget: 1e7, TrialCostBudget: 1e7})
	d := decide(setOf(t, big, p), in)
	if d.Reason == evaluator.ReasonPolicyError {
		t.Fatalf("stored: %s", d.Message)
	}
	// The same two parses without the comparison in a list.
	parses := decide(setOf(t, big, newPolicy("p", skipRule("r",
		"semver(vm.annotations['v']).major() != semver(vm.annotations['v']).major()", "R", "m", ""))), in)
	if d.Cost-parses.Cost < 509 {
		t.Errorf("cost %d, %d of it the parses: want the semver's 509 identifiers charged", d.Cost, parses.Cost)
	}
}

// A variable holding an optional of a Semver is declared without its optional (dyn): the
// estimate took the value for a bare Semver, one node to compare, while the run time walks
// the optional and every part of the version — an admitted `variables.o == variables.o`
// stopped at the per-call limit on a long version (issue #15, tester atk9 finding 3). And a
// bare Semver searched for in a list of Semvers was charged its own parts on top of the
// list's, though each comparison stops at the list element's end: a search the estimate
// admitted was stopped (atk9 finding 3b). Each expression is either refused when written or
// within the per-call limit on the longest version the input bounds allow.
func TestWrappedParsedValuesAreEstimatedAsTheRunTimeWalksThem(t *testing.T) {
	c := newCompiler(t)
	in := pooledAuto()
	// The longest version semver() parses (maxSemverLength): 509 identifiers.
	in.VM.Annotations = map[string]string{"v": "1.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 509), ".")}
	for _, tc := range []struct{ v, rule string }{
		{"optional.of(semver(vm.annotations[?'v'].orValue('1.0.0')))", "variables.o == variables.o"},
		{"dyn(optional.of(semver(vm.annotations[?'v'].orValue('1.0.0'))))", "variables.o == variables.o"},
		{"[optional.of(semver(vm.annotations[?'v'].orValue('1.0.0')))]", "variables.o[0] == variables.o[0]"},
		{"semver(vm.annotations[?'v'].orValue('1.0.0'))", "variables.o in [semver('1.0.0'), semver('2.0.0-rc.1')]"},
		{"semver(vm.annotations[?'v'].orValue('1.0.0'))", "[semver('1.0.0'), semver('2.0.0')].includes(variables.o)"},
	} {
		p := newPolicy("p", variable("o", tc.v), skipRule("r", tc.rule, "R", "m", ""))
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			continue // refused when written: nothing runs
		}
		d := decide(setOf(t, c, p), in)
		if d.Reason == evaluator.ReasonPolicyError {
			t.Errorf("%s over %s: admitted, then %s", tc.rule, tc.v, d.Message)
		}
	}
}
