package evaluator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/cel-go/interpreter"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// A regex call on a literal string is estimated with the literal's own length (stringBound),
// so that what compiles cannot exceed the per-call limit at run time: for every literal
// length × pattern × form of call below, either the expression is refused by the estimate,
// or its run-time cost is within both its estimate and the per-call limit. Before c767a49
// a call the checker could not size was left to the library's pattern-length formula.
func TestRegexEstimateBoundsRunTimeCost(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	patterns := []string{`a+`, `(a|b)*c`, `.{200}x`, `(?i)\pL{20}`, `[a-z]{50}b`, `^a.*a$`, `(ab{30}){8}`,
		strings.Repeat(`(?:x|y)`, 40), `\d{3}-\d{4}`}
	forms := []string{"%s.matches(%s)", "matches(%s, %s)", "%s.find(%s) != ''", "%s.findAll(%s).size() >= 0",
		"%s.findAll(%s, 3).size() >= 0", "%s.trim().matches(%s)"}
	accepted, refused := 0, 0
	for _, n := range []int{0, 1, 10, 1000, 10_000, 65_000} /* a policy holds ≤ MaxPolicySourceBytes */ {
		for _, filler := range []string{"a", "ab"} {
			lit := "'" + strings.Repeat(filler, n/len(filler)+1)[:n] + "'"
			for _, pattern := range patterns {
				for _, form := range forms {
					expr := fmt.Sprintf(form, lit, "r'"+pattern+"'")
					name := fmt.Sprintf("%d×%q %s %s", n, filler, form, pattern)
					p := &v1alpha1.ClusterIPAMPolicy{Spec: v1alpha1.ClusterIPAMPolicySpec{
						MatchConditions: []v1alpha1.NamedExpression{{Name: "m", Expression: expr}},
						Allocation:      &v1alpha1.Expression{Expression: "'Auto'"}}}
					compiled, errs := c.Compile(p, nil)
					if len(errs) > 0 {
						// Refused by the estimate, or the pattern by its program's size.
						if len(errs) != 1 || !strings.Contains(errs[0].Detail, "estimated worst-case cost") &&
							!strings.Contains(errs[0].Detail, "instructions, at most") {
							t.Errorf("%s: errors %v, want it accepted or refused by the estimate", name, errs)
						}
						refused++
						continue
					}
					accepted++
					_, det, err := compiled.matchConditions[0].prog.Eval(interpreter.EmptyActivation())
					if err != nil {
						t.Errorf("%s: accepted at an estimate of %d, failed at run time: %v", name, compiled.estimated, err)
						continue
					}
					if cost := *det.ActualCost(); cost > compiled.estimated || cost > c.limits.PerCallCostLimit {
						t.Errorf("%s: run-time cost %d, estimate %d, per-call limit %d", name, cost, compiled.estimated, c.limits.PerCallCostLimit)
					}
				}
			}
		}
	}
	// The cases span both sides of the limit, or the property says nothing.
	if accepted == 0 || refused == 0 {
		t.Errorf("%d accepted, %d refused: want both", accepted, refused)
	}
	t.Logf("%d accepted within their estimate, %d refused by it", accepted, refused)
}
