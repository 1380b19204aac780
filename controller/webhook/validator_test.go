package webhook_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/webhook"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func newValidator(t *testing.T) *webhook.Validator {
	t.Helper()
	c, err := evaluator.NewCompiler(evaluator.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return &webhook.Validator{Compiler: c}
}

func policy(skip string) *v1alpha1.ClusterIPAMPolicy {
	return &v1alpha1.ClusterIPAMPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{
			Allocation: &v1alpha1.Expression{Expression: "'Auto'"},
			SkipRules:  []v1alpha1.SkipRule{{Name: "r", Expression: skip, Reason: "R"}},
		},
	}
}

// causes returns the field paths of an Invalid error's causes.
func causes(t *testing.T, err error) []string {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want an Invalid API error", err)
	}
	var out []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		out = append(out, c.Field)
	}
	return out
}

func TestCreateRejectsTypoWithFieldPath(t *testing.T) {
	p := policy("ipAdress.exists")
	p.Spec.Hotplug = &v1alpha1.Expression{Expression: "1"}
	_, err := newValidator(t).ValidateCreate(context.Background(), p)
	got := causes(t, err)
	if strings.Join(got, ",") != "spec.skipRules[0].expression,spec.hotplug.expression" {
		t.Errorf("causes = %v, want every error's path", got)
	}
	if !strings.Contains(err.Error(), `ClusterIPAMPolicy.ipam.virtualization.deckhouse.io "p" is invalid`) ||
		!strings.Contains(err.Error(), "undeclared reference to 'ipAdress'") {
		t.Errorf("message = %q", err.Error())
	}
}

func TestCreateAcceptsPolicyThatCompiles(t *testing.T) {
	if _, err := newValidator(t).ValidateCreate(context.Background(), policy("!ipAddress.exists")); err != nil {
		t.Errorf("ValidateCreate: %v", err)
	}
}

func TestUpdateRejectsExpressionThatNoLongerCompiles(t *testing.T) {
	_, err := newValidator(t).ValidateUpdate(context.Background(), policy("true"), policy("ipAdress.exists"))
	if got := causes(t, err); len(got) != 1 || got[0] != "spec.skipRules[0].expression" {
		t.Errorf("causes = %v", got)
	}
}

func TestUpdateLeavingSpecAloneIsAllowedEvenIfItDoesNotCompile(t *testing.T) {
	old, updated := policy("ipAdress.exists"), policy("ipAdress.exists")
	updated.Labels = map[string]string{"team": "net"}
	if _, err := newValidator(t).ValidateUpdate(context.Background(), old, updated); err != nil {
		t.Errorf("a metadata-only update was rejected: %v", err)
	}
}

func TestDeleteIsAlwaysAllowed(t *testing.T) {
	if _, err := newValidator(t).ValidateDelete(context.Background(), policy("ipAdress.exists")); err != nil {
		t.Errorf("ValidateDelete: %v", err)
	}
}

func TestCreateRejectsRepeatedSkipRuleNames(t *testing.T) {
	p := policy("true")
	p.Spec.SkipRules = append(p.Spec.SkipRules, v1alpha1.SkipRule{Name: "r", Expression: "false", Reason: "Other"})
	_, err := newValidator(t).ValidateCreate(context.Background(), p)
	if got := causes(t, err); len(got) != 1 || got[0] != "spec.skipRules[1].name" || !strings.Contains(err.Error(), `Duplicate value: "r"`) {
		t.Errorf("causes = %v (%v), want a Duplicate at spec.skipRules[1].name", got, err)
	}
}

func TestWarningsNameBothReplacedRulesAndSuspiciousParts(t *testing.T) {
	c, err := evaluator.NewCompiler(evaluator.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	installed := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{Priority: 10, SkipRules: []v1alpha1.SkipRule{{Name: "r", Expression: "false", Reason: "R"}}}}
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(installed).Build()
	v := &webhook.Validator{Compiler: c, Reader: reader}
	p := policy("false")
	p.Spec.FailurePolicy = v1alpha1.FailurePolicyIgnore
	p.Spec.SkipRules = append(p.Spec.SkipRules,
		v1alpha1.SkipRule{Name: "static-missing", Expression: "vm.labels['team'] == ''", Reason: "R", Message: "'no team on ' + vm.name"})
	warnings, err := v.ValidateCreate(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`spec.skipRules[1].message: looks like a CEL expression`,
		`spec.skipRules[1].expression: indexes a map without testing for the key`,
		`spec.skipRules[0].name: rule "r" of this policy (priority 0) replaces rule "r" of policy tenant (priority 10)`,
		`spec.skipRules[1].name: rule "static-missing" of this policy (priority 0) replaces rule "static-missing" of policy builtin:default (priority 1000)`,
	}
	if len(warnings) != len(want) {
		t.Fatalf("warnings = %q, want %d", warnings, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(warnings[i], w) {
			t.Errorf("warning %d = %q, want it to start with %q", i, warnings[i], w)
		}
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// sortingPolicy is variable a and a rule sorting it: refused when new once a holds values of
// no known order.
func sortingPolicy(a string) *v1alpha1.ClusterIPAMPolicy {
	p := policy("variables.a.sort().size() == 0")
	p.Spec.Variables = []v1alpha1.NamedExpression{{Name: "a", Expression: a}}
	return p
}

// An update that changes only the variable a rule reads is checked as the new policy it is,
// not with the rule as stored: before, the rule's unchanged text let the update through
// (then it failed at run time) while a create of the same object — and `ipamctl lint` — was
// refused at the rule.
func TestUpdateOfAVariableRechecksTheRulesReadingIt(t *testing.T) {
	v := newValidator(t)
	old, updated := sortingPolicy("[vm.name]"), sortingPolicy("[dyn(vm.name)]")
	if _, err := v.ValidateCreate(context.Background(), old); err != nil {
		t.Fatalf("the stored policy: %v", err)
	}
	_, createErr := v.ValidateCreate(context.Background(), updated)
	_, updateErr := v.ValidateUpdate(context.Background(), old, updated)
	for name, err := range map[string]error{"create": createErr, "update": updateErr} {
		if got := causes(t, err); len(got) != 1 || got[0] != "spec.skipRules[0].expression" {
			t.Errorf("%s: causes = %v, want the rule", name, got)
		}
	}
}

// An expression estimated beyond the per-call limit it runs under is admitted with a warning
// naming it (the run time stops it on inputs near the declared bounds); one estimated past
// ten times the limit is refused.
func TestAnEstimateBeyondThePerCallLimitIsAWarning(t *testing.T) {
	v := newValidator(t)
	p := policy("vm.annotations['a'].lowerAscii().upperAscii().lowerAscii().upperAscii() == 'x'")
	warnings, err := v.ValidateCreate(context.Background(), p)
	if err != nil {
		t.Fatalf("ValidateCreate: %v, want it admitted", err)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool {
		return strings.HasPrefix(w, "spec.skipRules[0].expression: estimated worst-case cost") && strings.Contains(w, "exceeds the per-call limit 100000")
	}) {
		t.Errorf("warnings = %q, want one naming the expression and the per-call limit", warnings)
	}
	if _, err := v.ValidateCreate(context.Background(), policy("holders.vms.all(a, holders.vms.exists(b, a == b))")); err == nil {
		t.Error("an estimate past ten times the per-call limit was admitted, want it refused")
	}
}
