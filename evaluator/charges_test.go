package evaluator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// withAnnotation is pooledAuto whose VM has annotation a = value.
func withAnnotation(value string) evaluator.Input {
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"a": value}
	return in
}

// Every string function of the environment is charged for the work its implementation does
// (cel-go's ext/strings v2, which Kubernetes pins): charAt, indexOf and lastIndexOf
// convert the whole receiver to runes on every call, but were charged 1 or
// a single traversal whatever the length; findAll and split build one string per match or
// part, which was not charged at all. Class: a charge that does not match the
// implementation.
func TestLinearStringWorkIsCharged(t *testing.T) {
	long := strings.Repeat("ab", 30_000) // 60,000 characters
	cases := []struct {
		name, expr string
		atLeast    int64 // units the call's work costs at least
	}{
		{"charAt converts the receiver to runes", "vm.annotations['a'].charAt(5) == '#'", 6_000},
		{"strings.quote walks the receiver", "strings.quote(vm.annotations['a']) == ''", 6_000},
		{"indexOf compares the needle at every position", "vm.annotations['a'].indexOf('abx') >= 0", 18_000},
		{"lastIndexOf compares the needle at every position", "vm.annotations['a'].lastIndexOf('abx') >= 0", 18_000},
		{"findAll builds one string per match", "size(vm.annotations['a'].findAll('a', 25000)) < 0", 6_000 + 2*25_000},
		{"split builds one string per part", "size(vm.annotations['a'].split('b')) < 0", 12_000 + 30_000},
	}
	// Raised limits: these calls on annotation values are refused by the default estimate.
	// The deadline too: this test is about charges, and a starved run (make test beside
	// API servers) once hit the 1 s default.
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e9, PerCallCostLimit: 1e9,
		InterfaceCostBudget: 1e9, TrialCostBudget: 1e9, Deadline: 30 * time.Second})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := setOf(t, c, newPolicy("p", skipRule("r", tc.expr, "R", "", "")))
			d := decide(s, withAnnotation(long))
			if d.Reason == evaluator.ReasonPolicyError {
				t.Fatalf("decision = %+v, want no PolicyError", d)
			}
			if d.Cost < tc.atLeast {
				t.Errorf("cost = %d, want at least %d: the call's work on 60,000 characters is not charged", d.Cost, tc.atLeast)
			}
		})
	}
}

// The static estimate charges the same work: a policy repeating it over a long input is
// refused, not admitted to hit the deadline (/tmp/a15w u5.yaml, fa11.yaml).
func TestLinearStringWorkIsEstimated(t *testing.T) {
	cases := []string{
		"lists.range(1000).exists(i, vm.annotations['a'].charAt(i) == '#')",
		"lists.range(100).exists(i, strings.quote(vm.annotations['a']) == '')",
		"vm.annotations['a'].indexOf(vm.annotations['b']) >= 0",
		"size(vm.annotations['a'].findAll('a')) < 0",
		"lists.range(10).exists(i, size(vm.annotations['a'].split('')) < 0)",
		"size(vm.annotations['a'].replace('', vm.annotations['b'])) < 0",
	}
	c := newCompiler(t)
	for _, expr := range cases {
		t.Run(expr, func(t *testing.T) {
			errs := compileRule(c, expr)
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
				t.Errorf("Compile errors = %v, want the estimate to refuse it", errs)
			}
		})
	}
}

// quantity() parses with arbitrary precision: ~8 µs a call at the guarded exponents, once
// charged ~1 unit, so 64 rules iterating it over the holders reached the deadline at 196,000
// units (FuzzGeneratedPolicy; its input is kept as a seed). Each call is charged its parse.
func TestQuantityIsChargedItsParse(t *testing.T) {
	c := newCompiler(t)
	for _, e := range []string{"quantity('1e-64').isInteger()", "isQuantity('1e-64')"} {
		d := decide(setOf(t, c, newPolicy("p", matchCondition("m", "lists.range(1000).all(i, "+e+" || true)"))), pooledAuto())
		if d.Cost < 1000*24 {
			t.Errorf("%s 1,000 times cost %d, want at least 24 a call", e, d.Cost)
		}
	}
}
