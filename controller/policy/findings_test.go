package policy

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// ignoredFailure is the decision of an interface on which failurePolicy Ignore policy
// "trial" failed and was passed over (issue #29, point 4: before, only the JSON trace said so).
func ignoredFailure() evaluator.Decision {
	return evaluator.Decision{Allocation: evaluator.AllocationAuto, Trace: evaluator.Trace{Failures: []evaluator.PolicyFailure{{
		Policy: "p", Mode: v1alpha1.PolicyModeEnforce, FailurePolicy: v1alpha1.FailurePolicyIgnore,
		Field: "spec.skipRules[0].expression", Error: "no such key: team"}}}}
}

// A policy that fails on some inputs says so on its status — how many, since when, and the
// last error with the VM, interface and field —, rewritten at most once a minute however many
// interfaces fail, and returns to True once nothing failed for FindingsWindow.
func TestAPolicyThatFailsOnSomeInputsSaysSoOnItsStatus(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	now := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	findings := NewFindings()
	r := f.process()
	r.Findings, r.now = findings, func() time.Time { return now }
	f.reconcile(r, "p")
	if c := meta.FindStatusCondition(f.get("p").Status.Conditions, v1alpha1.ConditionEvaluatesWithoutErrors); c == nil ||
		c.Status != metav1.ConditionTrue {
		t.Fatalf("before any error: condition %+v, want True", c)
	}

	for i := range 1000 {
		findings.Observe("ns/web-"+string(rune('a'+i%26)), "ClusterNetwork/corp", ignoredFailure(), now)
	}
	select {
	case e := <-findings.Changes():
		if e.Object.GetName() != "p" {
			t.Errorf("change for %q, want p", e.Object.GetName())
		}
	default:
		t.Fatal("no change announced for a new finding")
	}
	f.reconcile(r, "p")
	c := meta.FindStatusCondition(f.get("p").Status.Conditions, v1alpha1.ConditionEvaluatesWithoutErrors)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonEvaluationFailed {
		t.Fatalf("after errors: condition %+v, want False/EvaluationFailed", c)
	}
	for _, part := range []string{"1000 evaluations failed since 2026-12-05T10:00:00Z", "ClusterNetwork/corp",
		"spec.skipRules[0].expression", "failurePolicy Ignore", "no such key: team"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("message %q lacks %q", c.Message, part)
		}
	}
	if n := len(findings.Changes()); n != 0 {
		t.Errorf("%d more changes announced for errors of the same minute, want none (one write a minute)", n)
	}

	now = now.Add(FindingsWindow + 2*time.Second)
	f.reconcile(r, "p")
	if c := meta.FindStatusCondition(f.get("p").Status.Conditions, v1alpha1.ConditionEvaluatesWithoutErrors); c == nil ||
		c.Status != metav1.ConditionTrue {
		t.Errorf("after %s without errors: condition %+v, want True", FindingsWindow, c)
	}
}

// An enforced policy's PolicyError counts too; the built-in default's and the VM budget's
// (no policy) do not name a policy to blame.
func TestEnforcedPolicyErrorsAreFindings(t *testing.T) {
	findings := NewFindings()
	now := time.Now()
	findings.Observe("ns/web", "Network/lan", evaluator.Decision{Reason: evaluator.ReasonPolicyError, Policy: "strict",
		Message: "policy strict: spec.skipRules[0].expression: cost limit exceeded"}, now)
	findings.Observe("ns/web", "Network/lan", evaluator.Decision{Reason: evaluator.ReasonPolicyError,
		Message: "not evaluated: the VM's evaluation budget was spent"}, now)
	c, again := findings.condition("strict", 1, now)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "cost limit exceeded") || again <= 0 {
		t.Errorf("strict: %+v (again %s), want False naming the error and a requeue", c, again)
	}
	if c, _ := findings.condition("", 1, now); c.Status != metav1.ConditionTrue {
		t.Errorf("an error without a policy was blamed on policy %q", "")
	}
	var none *Findings
	if c, _ := none.condition("strict", 1, now); c != nil {
		t.Errorf("without findings the condition is %+v, want none (nothing can be said)", c)
	}
}
