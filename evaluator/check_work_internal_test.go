package evaluator

import (
	"testing"

	"github.com/vmipam/vmipam/policies"
)

// The bound on the checker's work is far from what a realistic policy spends: the built-in
// default policy, which holds ~2.5 KiB of CEL, spends under 1% of MaxPolicyCheckWork; and
// the estimate grows with the square of a generic chain's length, as the checker does.
func TestCheckWorkOfARealisticPolicyIsFarBelowTheBound(t *testing.T) {
	env := newExpressionsEnv(t)
	work := func(src string) uint64 {
		parsed, iss := env.Parse(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		return checkWork(env.Functions(), parsed.NativeRep().Expr())
	}
	builtin, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, src := range storedExpressions(builtin) {
		if src != "" {
			total += work(src)
		}
	}
	if total == 0 || total > MaxPolicyCheckWork/100 {
		t.Errorf("the built-in policy's check work = %d, want within 1%% of %d", total, MaxPolicyCheckWork)
	}
	chain := func(n int) string {
		s := "vm.labels['k'] == 'v'"
		for range n - 1 {
			s += " || vm.labels['k'] == 'v'"
		}
		return s
	}
	if w50, w100 := work(chain(50)), work(chain(100)); w100 < 3*w50 {
		t.Errorf("work of 50 terms %d, of 100 terms %d: want it to grow with the square", w50, w100)
	}
}
