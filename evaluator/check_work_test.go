package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// checkWorkErrors are the errors of errs that refuse an expression for MaxPolicyCheckWork.
func checkWorkErrors(errs []error) []error {
	var out []error
	for _, err := range errs {
		if strings.Contains(err.Error(), "type-checking the expression would copy") &&
			strings.Contains(err.Error(), fmt.Sprint(evaluator.MaxPolicyCheckWork)) {
			out = append(out, err)
		}
	}
	return out
}

func compileErrors(c *evaluator.Compiler, p, old *v1alpha1.ClusterIPAMPolicy) []error {
	_, errs := c.Compile(p, old)
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}

// The type checker's work on a policy is bounded before it is spent (issue #15): cel-go's
// checker copies its substitution mapping for every overload it tries, and the mapping grows
// with every generic operation, so 64 KiB of `dyn(1)+dyn(2)==dyn(3) || …` took 2.5–3 s of
// CPU to check (and was then refused for something else). Now the expressions past
// MaxPolicyCheckWork are refused, each with the work it would take, before the checker runs,
// for new and stored policies alike; an expression alone within the bound, even a 5,120
// character chain, compiles, and the bound is the policy's, not each expression's.
func TestTypeCheckingWorkIsBoundedPerPolicy(t *testing.T) {
	c := newCompiler(t)
	for _, term := range []string{"dyn(1)+dyn(2)==dyn(3)", "{'a': dyn(1), 'b': dyn('x')}['a']==dyn(1)", "vm.labels['k1'] == 'abcdefgh'"} {
		p := termChainPolicy(term, 5120)
		for name, old := range map[string]*v1alpha1.ClusterIPAMPolicy{"new": nil, "stored": p} {
			if errs := compileErrors(c, p, old); len(checkWorkErrors(errs)) == 0 {
				t.Errorf("%s, %s: errors %.300v, want expressions refused for the type checker's work", term, name, errs)
			}
		}
	}
	one := termChainPolicy("vm.labels['k1'] == 'abcdefgh'", 5120)
	one.Spec.SkipRules = one.Spec.SkipRules[:1]
	if errs := compileErrors(c, one, nil); len(errs) > 0 {
		t.Errorf("one 5,120-character chain: %.300v, want it compiled", errs)
	}
	two := termChainPolicy("vm.labels['k1'] == 'abcdefgh'", 5120)
	two.Spec.SkipRules = two.Spec.SkipRules[:2]
	errs := compileErrors(c, two, nil)
	if len(errs) != 1 || len(checkWorkErrors(errs)) != 1 || !strings.Contains(errs[0].Error(), "spec.skipRules[1].expression") {
		t.Errorf("two 5,120-character chains: %.300v, want the second refused for the policy's check work", errs)
	}
}

// Policies compiled within one CheckWorkAllowance share it (issue #15, the dry run: a request
// of ~48 policies each within MaxPolicyCheckWork cost ~45 s of CPU): each spends from its own
// bound and from the shared one, and the expression that would cross the shared one is
// refused before it is checked, naming it.
func TestCompileWithinSharesTheCheckWork(t *testing.T) {
	c := newCompiler(t)
	one := termChainPolicy("vm.labels['k1'] == 'abcdefgh'", 5120)
	one.Spec.SkipRules = one.Spec.SkipRules[:1]
	alone := evaluator.NewCheckWorkAllowance(evaluator.MaxPolicyCheckWork, "the test's policies")
	if _, errs := c.CompileWithin(one, nil, alone); len(errs) > 0 {
		t.Fatalf("one chain: %.300v, want it compiled", errs)
	}
	work := alone.Spent()
	if work == 0 || work > evaluator.MaxPolicyCheckWork {
		t.Fatalf("one chain spent %d, want within (0, %d]", work, evaluator.MaxPolicyCheckWork)
	}
	shared := evaluator.NewCheckWorkAllowance(work*3/2, "the test's policies")
	if _, errs := c.CompileWithin(one, nil, shared); len(errs) > 0 {
		t.Fatalf("the first policy: %.300v, want it compiled", errs)
	}
	_, errs := c.CompileWithin(one, nil, shared)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.skipRules[0].expression") ||
		!strings.Contains(errs[0].Error(), fmt.Sprintf("beyond the %d left of the %d the test's policies may spend together", work/2, work*3/2)) {
		t.Errorf("the second policy: %.500v, want its expression refused for the shared check work", errs)
	}
	if shared.Spent() != work {
		t.Errorf("spent %d, want %d: a refused expression spends nothing", shared.Spent(), work)
	}
	if _, errs := c.CompileWithin(one, nil, nil); len(errs) > 0 {
		t.Errorf("without a shared allowance: %.300v, want it compiled as by Compile", errs)
	}
}
