package evaluator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator/internal/cost"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// celMessagePolicy is issue #15's lint attack: 60 skip rules of a cheap expression, each
// with a static message of ~1,000 characters of generic CEL that is costly to type-check.
func celMessagePolicy(term string) *v1alpha1.ClusterIPAMPolicy {
	msg := term
	for len(msg)+4+len(term) <= 1004 {
		msg += " || " + term
	}
	p := &v1alpha1.ClusterIPAMPolicy{}
	p.Name = "p"
	for i := range 60 {
		p.Spec.SkipRules = append(p.Spec.SkipRules, v1alpha1.SkipRule{Name: fmt.Sprintf("r%d", i),
			Expression: fmt.Sprintf("vm.name == 'r%d'", i), Reason: "X", Message: msg})
	}
	return p
}

// Lint type-checks the messages from the policy's one MaxPolicyCheckWork account, not each
// message from a fresh one (3.1–3.5 s of CPU on the webhook for the policy below).
func TestLintCheckWorkIsBoundedByThePolicyAccount(t *testing.T) {
	c, err := NewCompiler(DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	env := newExpressionsEnv(t)
	for _, term := range []string{"1 in [dyn(1),2]", "1 in [1,dyn(1)]"} {
		p := celMessagePolicy(term)
		parsed, iss := env.Parse(p.Spec.SkipRules[0].Message)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		one := cost.CheckWork(env.Functions(), parsed.NativeRep().Expr())
		if one > MaxPolicyCheckWork || one*uint64(len(p.Spec.SkipRules)) <= MaxPolicyCheckWork {
			t.Fatalf("one message's check work %d: want the policy's messages to exceed %d together but not alone",
				one, MaxPolicyCheckWork)
		}
		warnings, work := c.lint(p)
		if work == 0 || work > MaxPolicyCheckWork {
			t.Errorf("%s: Lint's check work = %d, want within (0, %d]", term, work, MaxPolicyCheckWork)
		}
		for _, w := range warnings {
			if !strings.HasSuffix(w.Field, ".message") {
				t.Errorf("%s: unexpected warning %v", term, w)
			}
		}
	}
}

// A message that looks like CEL is still warned about when the account has room for it.
func TestLintStillWarnsAboutACheapCELMessage(t *testing.T) {
	c, err := NewCompiler(DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	p := celMessagePolicy("1 in [dyn(1),2]")
	p.Spec.SkipRules[0].Message = "interface.ipAddressName"
	warnings, _ := c.lint(p)
	if len(warnings) == 0 || warnings[0].Field != "spec.skipRules[0].message" {
		t.Errorf("warnings = %v, want spec.skipRules[0].message first", warnings)
	}
}
