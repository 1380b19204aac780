package dryrun_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/evaluator"
)

// policiesBody is a request for vmOnCorp with a candidate policy per element of rules, each
// with the skip rules given (CEL expressions), as JSON (which YAML reads as it is).
func policiesBody(rules ...[]string) string {
	var policies []string
	for i, exprs := range rules {
		var skip []string
		for j, e := range exprs {
			skip = append(skip, fmt.Sprintf(`{"name": "r%d", "reason": "R", "message": "m", "expression": %q}`, j, e))
		}
		policies = append(policies, fmt.Sprintf(`{"metadata": {"name": "p%d"}, "spec": {"skipRules": [%s]}}`, i, strings.Join(skip, ", ")))
	}
	return vmOnCorp + "policies: [" + strings.Join(policies, ", ") + "]\n"
}

// countingEngine is newEngine, counting the candidate policies that did not compile.
func countingEngine(t *testing.T) (*dryrun.Engine, *int) {
	e := newEngine(t)
	n := 0
	e.OnCompileError = func() { n++ }
	return e, &n
}

// A request's candidate policies are bounded in number and in CEL source together, before
// any is compiled (issue #15, finding 4: the 3 MiB body held ~48 policies of 62 KB, ~45 s of
// CPU to compile inside the controller). Each bound is a 422 at policies alone.
func TestDecodeRefusesTooManyOrTooLargeCandidatePoliciesWithoutCompiling(t *testing.T) {
	broken := "ipAdress.exists(a, a)" // a compile error, were it compiled
	many := make([][]string, dryrun.MaxPolicies+1)
	for i := range many {
		many[i] = []string{broken}
	}
	// 5 policies of 13 expressions of 4,096 bytes: 260 KiB, each policy within its 64 KiB
	chain := broken + strings.Repeat(" || "+broken, 4096/(len(broken)+4)-1)
	large := make([][]string, 5)
	for i := range large {
		for range 13 {
			large[i] = append(large[i], chain)
		}
	}
	for _, tc := range []struct {
		name   string
		rules  [][]string
		typ    field.ErrorType
		detail string
	}{
		{"more than MaxPolicies", many, field.ErrorTypeTooMany, fmt.Sprintf("must have at most %d items", dryrun.MaxPolicies)},
		{"more source than MaxPoliciesSourceBytes", large, field.ErrorTypeForbidden,
			fmt.Sprintf("beyond the %d a request's may hold", dryrun.MaxPoliciesSourceBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, failed := countingEngine(t)
			_, err := e.Decode(context.Background(), []byte(policiesBody(tc.rules...)), dryrun.DecodeOptions{})
			var inv *dryrun.InvalidError
			if !errors.As(err, &inv) || len(inv.Errs) != 1 || inv.Errs[0].Field != "policies" || inv.Errs[0].Type != tc.typ ||
				!strings.Contains(inv.Errs[0].Detail, tc.detail) {
				t.Fatalf("Decode = %.600v, want one %s error at policies: %s", err, tc.typ, tc.detail)
			}
			if *failed != 0 {
				t.Errorf("%d policies compiled and failed, want none compiled", *failed)
			}
		})
	}
	within := many[:dryrun.MaxPolicies]
	_, err := newEngine(t).Decode(context.Background(), []byte(policiesBody(within...)), dryrun.DecodeOptions{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("policies[%d].spec.skipRules[0].expression", dryrun.MaxPolicies-1)) {
		t.Errorf("MaxPolicies policies: %.300v, want each compiled (and refused for its own error)", err)
	}
}

// The type checker's work on a request's candidate policies is bounded together
// (MaxPoliciesCheckWork), not only per policy: each policy here is within its own bound, and
// the policy whose expression would cross the request's is refused at that expression.
func TestDecodeBoundsTheCandidatePoliciesCheckWorkTogether(t *testing.T) {
	term := "vm.labels['k1'] == 'abcdefgh'"
	chain := term + strings.Repeat(" || "+term, 5120/(len(term)+4)-1)
	rules := make([][]string, 9) // each chain spends more than half of MaxPolicyCheckWork
	for i := range rules {
		rules[i] = []string{chain}
	}
	_, err := newEngine(t).Decode(context.Background(), []byte(policiesBody(rules...)), dryrun.DecodeOptions{})
	var inv *dryrun.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Decode = %.300v, want an *InvalidError", err)
	}
	shared := fmt.Sprintf("of the %d a request's candidate policies may spend together", dryrun.MaxPoliciesCheckWork)
	first := -1
	for _, e := range inv.Errs {
		var i int
		if _, err := fmt.Sscanf(e.Field, "policies[%d].spec.skipRules[0].expression", &i); err != nil || !strings.Contains(e.Detail, shared) {
			t.Errorf("error %v, want only refusals for the request's check work", e)
			continue
		}
		if first < 0 {
			first = i
		}
	}
	if max := int(dryrun.MaxPoliciesCheckWork / evaluator.MaxPolicyCheckWork); first < max || len(inv.Errs) != len(rules)-first {
		t.Errorf("refused from policies[%d] on (%d errors), want the first %d or more compiled, every later one refused", first, len(inv.Errs), max)
	}
}

// A request whose context ends stops compiling at the next policy: a compile cannot be
// interrupted, but the timeout no longer waits for every policy of the request.
func TestDecodeStopsCompilingWhenTheContextEnds(t *testing.T) {
	e := newEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	compiled := 0
	e.OnCompileError = func() { compiled++; cancel() }
	rules := [][]string{{"ipAdress.exists(a, a)"}, {"ipAdress.exists(a, a)"}, {"ipAdress.exists(a, a)"}}
	_, err := e.Decode(ctx, []byte(policiesBody(rules...)), dryrun.DecodeOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Decode = %v, want context.Canceled", err)
	}
	if compiled != 1 {
		t.Errorf("%d policies compiled, want 1: the context ended after the first", compiled)
	}
}
