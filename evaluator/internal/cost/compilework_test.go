package cost

import (
	"testing"

	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// expressions are the CEL expressions of p.
func expressions(p *v1alpha1.ClusterIPAMPolicy) []string {
	var out []string
	for _, v := range p.Spec.Variables {
		out = append(out, v.Expression)
	}
	for _, m := range p.Spec.MatchConditions {
		out = append(out, m.Expression)
	}
	if p.Spec.Allocation != nil {
		out = append(out, p.Spec.Allocation.Expression)
	}
	for _, r := range p.Spec.SkipRules {
		out = append(out, r.Expression)
		if r.MessageExpression != "" {
			out = append(out, r.MessageExpression)
		}
	}
	if p.Spec.Hotplug != nil {
		out = append(out, p.Spec.Hotplug.Expression)
	}
	return out
}

// The bound on the checker's work is far from what a realistic policy spends: the built-in
// default policy, which holds ~2.5 KiB of CEL, spends under 1% of MaxPolicyCheckWork; and
// the estimate grows with the square of a generic chain's length, as the checker does.
func TestCheckWorkOfARealisticPolicyIsFarBelowTheBound(t *testing.T) {
	env := testEnv(t, testConfig())
	work := func(src string) uint64 {
		parsed, iss := env.Parse(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		return CheckWork(env.Functions(), parsed.NativeRep().Expr())
	}
	builtin, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var total uint64
	for _, src := range expressions(builtin) {
		total += work(src)
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
	env := testEnv(t, testConfig())
	for _, src := range []string{"optional.of(1)", "optional.none()", "sets.contains([1], [1])", "strings.quote('a')"} {
		parsed, iss := env.Parse(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		call := parsed.NativeRep().Expr()
		var args uint64
		for _, a := range call.AsCall().Args() {
			args += CheckWork(env.Functions(), a)
		}
		if got := CheckWork(env.Functions(), call); got < args+tryCost {
			t.Errorf("CheckWork(%s) = %d, want at least one overload tried (%d) beyond its arguments' %d", src, got, tryCost, args)
		}
	}
}
