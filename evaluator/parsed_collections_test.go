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
		"sets.equivalent([variables.s], [variables.s])",
		"[variables.s].distinct().size() == 1",
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
	// Stored, the run time charges the parts: one semver of 4,000 pre-release identifiers in
	// a list compared with itself costs thousands of units, not one.
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"v": "1.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 4000), ".")}
	p := newPolicy("p", skipRule("r", "[semver(vm.annotations['v'])] == [semver(vm.annotations['v'])]", "R", "m", ""))
	// Limits that admit it (the estimate refuses it at the defaults: the annotation's text
	// may hold 131,000 identifiers).
	big := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e7, PerCallCostLimit: 1e7, InterfaceCostBudget: 1e7, TrialCostBudget: 1e7})
	d := decide(setOf(t, big, p), in)
	if d.Reason == evaluator.ReasonPolicyError {
		t.Fatalf("stored: %s", d.Message)
	}
	if d.Cost < 4000 {
		t.Errorf("cost %d, want the semver's 4,000 identifiers charged", d.Cost)
	}
}
