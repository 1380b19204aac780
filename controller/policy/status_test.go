package policy

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func TestReadyCondition(t *testing.T) {
	typo := field.Invalid(field.NewPath("spec", "skipRules").Index(0).Child("expression"), "ipAdress.exists",
		"ERROR: <input>:1:1: undeclared reference to 'ipAdress' (in container '')\n | ipAdress.exists\n | ^")
	hotplug := field.Invalid(field.NewPath("spec", "hotplug", "expression"), "'yes'",
		"must evaluate to bool, but evaluates to string")
	alloc := field.NotSupported(field.NewPath("spec", "allocation", "expression"), "Dhcp", []string{"Auto", "Static", "None"})
	tests := []struct {
		name       string
		out        outcome
		wantStatus metav1.ConditionStatus
		wantReason string
		want       string
	}{{
		name:       "a generation that compiles is Ready and serves",
		out:        outcome{generation: 3, serving: 3},
		wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonCompiled,
		want: "Generation 3 compiled and serves",
	}, {
		name:       "a failing generation names every path and the generation that keeps serving",
		out:        outcome{generation: 4, serving: 3, errs: field.ErrorList{typo, hotplug}},
		wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonCompilationFailed,
		want: "generation 4 does not compile: " +
			"spec.skipRules[0].expression: at 1:1: undeclared reference to 'ipAdress' (in container ''); " +
			"spec.hotplug.expression: must evaluate to bool, but evaluates to string; generation 3 keeps serving",
	}, {
		name:       "a policy that never compiled says it is not used",
		out:        outcome{generation: 1, errs: field.ErrorList{alloc}},
		wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonCompilationFailed,
		want: `generation 1 does not compile: spec.allocation.expression: Unsupported value: "Dhcp": ` +
			`supported values: "Auto", "Static", "None"; the policy is not used until it compiles`,
	}, {
		name:       "a stored last good generation that cannot be restored is explained",
		out:        outcome{generation: 5, errs: field.ErrorList{typo}, restoreErr: errors.New("annotation x is not readable")},
		wantStatus: metav1.ConditionFalse, wantReason: v1alpha1.ReasonCompilationFailed,
		want: "generation 5 does not compile: spec.skipRules[0].expression: at 1:1: undeclared reference to 'ipAdress' (in container ''); " +
			"the last good generation cannot be restored (annotation x is not readable); the policy is not used until it compiles",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := readyCondition(tt.out)
			if c.Type != v1alpha1.ConditionReady || c.Status != tt.wantStatus || c.Reason != tt.wantReason ||
				c.ObservedGeneration != tt.out.generation {
				t.Errorf("condition = %s/%s/%s (generation %d), want Ready/%s/%s (generation %d)",
					c.Type, c.Status, c.Reason, c.ObservedGeneration, tt.wantStatus, tt.wantReason, tt.out.generation)
			}
			if c.Message != tt.want {
				t.Errorf("message:\n got %s\nwant %s", c.Message, tt.want)
			}
		})
	}
}

func TestFailureMessageStaysWithinConditionLimitAndKeepsServingGeneration(t *testing.T) {
	var errs field.ErrorList
	for i := range 64 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "skipRules").Index(i).Child("expression"),
			strings.Repeat("x", 5000), strings.Repeat("undeclared reference ", 50)))
	}
	msg := failureMessage(outcome{generation: 2, serving: 1, errs: errs})
	if len(msg) > maxMessageBytes {
		t.Errorf("message is %d bytes, want at most %d", len(msg), maxMessageBytes)
	}
	if !strings.HasSuffix(msg, "; generation 1 keeps serving") {
		t.Errorf("message ends %q, want the serving generation", msg[len(msg)-60:])
	}
	if strings.Contains(msg, strings.Repeat("x", 100)) {
		t.Error("message repeats the invalid expression")
	}
}

func TestTruncateCutsOnRuneBoundary(t *testing.T) {
	got := truncate("ééééé", 7) // 10 bytes; room for 7 - len(" …") = 3 bytes -> one é
	if got != "é …" {
		t.Errorf("truncate = %q, want %q", got, "é …")
	}
	if got := truncate("short", 10); got != "short" {
		t.Errorf("truncate = %q, want it unchanged", got)
	}
}

// A generation that compiled sets WithinCostLimits: False naming what compiling warned about
// (an estimate beyond the per-call limit), True without.
func TestCostCondition(t *testing.T) {
	p := &v1alpha1.ClusterIPAMPolicy{}
	warned := newStatus(p, outcome{generation: 3, serving: 3, warnings: []evaluator.Warning{
		{Field: "spec.skipRules[0].expression", Message: "estimated worst-case cost 105000 exceeds the per-call limit 100000 …"}}})
	c := meta.FindStatusCondition(warned.Conditions, v1alpha1.ConditionWithinCostLimits)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonEstimateExceedsLimit || c.ObservedGeneration != 3 ||
		!strings.Contains(c.Message, "generation 3: spec.skipRules[0].expression: estimated worst-case cost 105000") {
		t.Errorf("condition = %+v, want False naming the expression", c)
	}
	clean := newStatus(p, outcome{generation: 4, serving: 4})
	if c := meta.FindStatusCondition(clean.Conditions, v1alpha1.ConditionWithinCostLimits); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("condition = %+v, want True", c)
	}
	failed := newStatus(p, outcome{generation: 5, serving: 4, errs: field.ErrorList{field.Invalid(field.NewPath("spec"), "", "x")}})
	if c := meta.FindStatusCondition(failed.Conditions, v1alpha1.ConditionWithinCostLimits); c != nil {
		t.Errorf("condition = %+v for a generation that did not compile, want none", c)
	}
}
