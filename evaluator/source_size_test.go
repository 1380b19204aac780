package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// orChain is a CEL expression of about n characters (n ≥ 40): an OR of label comparisons,
// the widest expression per character the compiler meets (issue #15: 112 of them at the
// CRD's 5,120 characters took 12.5 s of CPU to compile).
func orChain(n int) string {
	var b strings.Builder
	for i := 0; ; i++ {
		term := fmt.Sprintf("vm.labels['k%d'] == 'abcdefgh'", i)
		if b.Len()+len(term)+4 > n {
			return b.String()
		}
		if i > 0 {
			b.WriteString(" || ")
		}
		b.WriteString(term)
	}
}

// chainPolicy is a policy of the given numbers of matchConditions, variables and skip rules,
// each an orChain of n characters.
func chainPolicy(conditions, variables, rules, n int) *v1alpha1.ClusterIPAMPolicy {
	var opts []policyOption
	for i := range conditions {
		opts = append(opts, matchCondition(fmt.Sprintf("m%d", i), orChain(n)))
	}
	for i := range variables {
		opts = append(opts, variable(fmt.Sprintf("v%d", i), orChain(n)))
	}
	for i := range rules {
		opts = append(opts, skipRule(fmt.Sprintf("r%d", i), orChain(n), "X", "m", ""))
	}
	return newPolicy("p", opts...)
}

// A policy's expressions together may hold at most evaluator.MaxPolicySourceBytes: beyond,
// the policy is refused at spec before anything is compiled (here a type error in one
// expression is not even reported), for a new policy and a stored one alike. Before, the
// tester's policy within every per-field CRD limit compiled for 12.5 s of CPU, beyond the
// webhook's 5 s, and again for every generation the controller read.
func TestAPolicysSourceSizeIsBoundedBeforeCompiling(t *testing.T) {
	c := newCompiler(t)
	p := chainPolicy(16, 32, 64, 5100)
	p.Spec.SkipRules[0].Expression = "1 + 'a' == 2 || " + orChain(5000)
	for name, old := range map[string]*v1alpha1.ClusterIPAMPolicy{"new": nil, "stored": p} {
		_, errs := c.Compile(p, old)
		if len(errs) != 1 || errs[0].Field != "spec" ||
			!strings.Contains(errs[0].Detail, fmt.Sprint(evaluator.MaxPolicySourceBytes)) {
			t.Errorf("%s: errors = %v, want one at spec naming the limit %d", name, errs, evaluator.MaxPolicySourceBytes)
		}
	}
	if _, errs := c.Compile(largestAdmittedPolicy(), nil); len(errs) > 0 {
		t.Errorf("the largest admitted policy: %v, want it compiled", errs)
	}
}

// largestAdmittedPolicy is the compiler's worst case of OR chains within
// MaxPolicySourceBytes and MaxPolicyCheckWork: one in every expression the CRD allows but
// messages (16 matchConditions, 32 variables, 64 skip rules), filling the source bound. (Twelve
// chains of the CRD's 5,120 characters, the worst case before MaxPolicyCheckWork, are refused
// for the checker's work, which grows with the square of a chain's length.)
func largestAdmittedPolicy() *v1alpha1.ClusterIPAMPolicy {
	return chainPolicy(16, 32, 64, evaluator.MaxPolicySourceBytes/(16+32+64))
}

// BenchmarkCompileLargestAdmittedPolicy reports what compiling the largest policy admitted
// costs (docs/CEL-LIBRARY.md quotes it): it must stay well within the webhook's 5 s timeout,
// and it is what the controller spends for each generation of such a policy.
func BenchmarkCompileLargestAdmittedPolicy(b *testing.B) {
	c := newCompiler(b)
	p := largestAdmittedPolicy()
	start := cpuNow(b)
	for b.Loop() {
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
	reportCPU(b, start)
}
