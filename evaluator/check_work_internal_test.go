package evaluator

import (
	"strings"
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

// A namespaced function (optional.of, sets.contains, strings.quote) is parsed as a member
// call on an identifier and resolved by the checker to its qualified name: its overloads are
// tried and instantiated like any other function's. Before, checkWork looked for a function
// "of", found none and counted nothing, and 64 KiB of optional.of(1).hasValue() chains were
// admitted at ~50,000 units a rule for ~35 ms of CPU each.
func TestCheckWorkCountsNamespacedFunctions(t *testing.T) {
	env := newExpressionsEnv(t)
	for _, src := range []string{"optional.of(1)", "optional.none()", "sets.contains([1], [1])", "strings.quote('a')"} {
		parsed, iss := env.Parse(src)
		if failed(iss) {
			t.Fatal(iss.Err())
		}
		call := parsed.NativeRep().Expr()
		var args uint64
		for _, a := range call.AsCall().Args() {
			args += checkWork(env.Functions(), a)
		}
		if got := checkWork(env.Functions(), call); got < args+tryCost {
			t.Errorf("checkWork(%s) = %d, want at least one overload tried (%d) beyond its arguments' %d", src, got, tryCost, args)
		}
	}
}

// The hint of a refused expression compiles probes of its parts; they draw on an allowance of
// the expression's own check work, so a chain of calls over a costly operand does not check
// the operand once per call (issue #15, tester atk12 finding 2: 4.3–5.6 s of CPU for one
// refused 4.6 KB expression). A probe past the allowance is not compiled.
func TestHintProbesDrawOnAnAllowance(t *testing.T) {
	env := newExpressionsEnv(t)
	operand := strings.TrimSuffix(strings.Repeat("dyn(1)+dyn(2)==dyn(3) || ", 140), " || ")
	parsed, iss := env.Parse("(" + operand + " ? 'a' : 'b').lowerAscii() == 'a'")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	p := newProbes(env, parsed.NativeRep().Expr())
	allowance := p.left
	if allowance == 0 {
		t.Fatal("no allowance for the hint of a costly expression")
	}
	if _, ok := p.cost("(" + operand + " ? 'a' : 'b').matches('a')"); !ok {
		t.Fatalf("the first probe (within the allowance of %d) did not compile", allowance)
	}
	if _, ok := p.cost("(" + operand + " ? 'a' : 'b').lowerAscii().matches('a')"); ok {
		t.Errorf("a second probe of the whole operand compiled: the allowance of %d was spent on the first", allowance)
	}
	if p.left != 0 {
		t.Errorf("%d of the allowance left after a probe past it, want 0 (no later probe runs)", p.left)
	}
}
