package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A semver or URL compared inside a collection (`[s] == [s]`, `s in [t]`, `sets.*`, `distinct`)
// is compared in full — every pre-release identifier, the whole URL re-serialized — but cel-go
// charges it as a scalar: `[s] == [s]` over 400 iterations on a semver of 120,000 identifiers
// ran at ~31 µs a unit, and one policy ran into the deadline (issue #15, tester atk8 finding
// 1). The deep walk counts the value's parts, before the comparison runs and in its charge.
func TestParsedValuesInCollectionsAreChargedByTheirParts(t *testing.T) {
	// The run time charges the parts: one semver of 509 pre-release identifiers (the
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
