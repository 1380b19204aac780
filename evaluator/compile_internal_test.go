package evaluator

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// futureCompiler is a compiler whose environment has a function, future(), introduced in a
// language version after LanguageVersion: like any library of a later Kubernetes version, it
// exists in the StoredExpressions environment but not in the NewExpressions one. (At 1.37 the
// base environment has no library that is in one and not the other, so the test adds one.)
func futureCompiler(t *testing.T) *Compiler {
	t.Helper()
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	future := cel.Function("future", cel.Overload("future", nil, cel.BoolType,
		cel.FunctionBinding(func(...ref.Val) ref.Val { return types.True })))
	c.envSet, err = c.envSet.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(LanguageVersion.Major(), LanguageVersion.Minor()+1),
		EnvOptions:        []cel.EnvOption{future},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func policyWithConditions(exprs ...string) *v1alpha1.ClusterIPAMPolicy {
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{Allocation: &v1alpha1.Expression{Expression: "'Auto'"}}}
	for _, e := range exprs {
		p.Spec.MatchConditions = append(p.Spec.MatchConditions, v1alpha1.NamedExpression{Name: "m", Expression: e})
	}
	return p
}

func TestUnchangedExpressionsCompileInTheStoredEnvironment(t *testing.T) {
	c := futureCompiler(t)
	p := policyWithConditions("future()")
	cases := []struct {
		name   string
		old    *v1alpha1.ClusterIPAMPolicy
		stored bool
	}{
		{"a new policy uses the new environment", nil, false},
		{"an unchanged expression uses the stored environment", policyWithConditions("future()"), true},
		{"a changed expression uses the new environment", policyWithConditions("future() || true"), false},
		{"the same expression at another path uses the new environment", policyWithConditions("true", "future()"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := c.Compile(p, tc.old)
			if tc.stored && len(errs) > 0 {
				t.Errorf("Compile: %v, want it to compile in the stored environment", errs)
			}
			if !tc.stored && (len(errs) != 1 || !strings.Contains(errs[0].Error(), "undeclared reference to 'future'")) {
				t.Errorf("Compile: %v, want future() undeclared in the new environment", errs)
			}
		})
	}
}

func TestStoredExpressionsIndexesEveryExpression(t *testing.T) {
	p := policyWithConditions("m0")
	p.Spec.Variables = []v1alpha1.NamedExpression{{Name: "v", Expression: "v0"}}
	p.Spec.SkipRules = []v1alpha1.SkipRule{{Expression: "s0", MessageExpression: "s0m", Message: "s0s"}}
	p.Spec.Hotplug = &v1alpha1.Expression{Expression: "h"}
	got := storedExpressions(p)
	want := map[string]string{
		"spec.variables[0].expression": "v0", "spec.matchConditions[0].expression": "m0",
		"spec.allocation.expression": "'Auto'", "spec.skipRules[0].expression": "s0",
		"spec.skipRules[0].messageExpression": "s0m", "spec.hotplug.expression": "h",
		"spec.skipRules[0].message": "s0s", // checked as text when new (messageError)
	}
	if len(got) != len(want) {
		t.Errorf("storedExpressions = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("storedExpressions[%s] = %q, want %q", k, got[k], v)
		}
	}
}
