package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vmipam/vmipam/evaluator"
)

// TestAuditDecisionsAreCounted: an Audit-mode policy's would-be decision shows in
// vmipam_audit_decisions_total, so admins can see what enforcing it would change.
func TestAuditDecisionsAreCounted(t *testing.T) {
	counter := auditDecisions.WithLabelValues(SourceController, "strict", OutcomeSkipped, "NotAllowed")
	before := testutil.ToFloat64(counter)
	Controller.Decided(evaluator.Decision{Allocation: evaluator.AllocationAuto, Trace: evaluator.Trace{
		Audit: []evaluator.AuditRecord{{Policy: "strict", Allocation: evaluator.AllocationAuto, Skip: true, Reason: "NotAllowed"}}}})
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Errorf("audit counter grew by %v, want 1", got)
	}
}

// TestPolicyErrorsAndAuditDifferencesAreCounted (issue #29, point 4): an error that decided
// nothing (an Ignore policy passed over, a failed Audit record) and an enforced policy's
// PolicyError count per policy and mode; an Audit record that would decide otherwise counts
// per Audit policy — before, only the JSON trace said so.
func TestPolicyErrorsAndAuditDifferencesAreCounted(t *testing.T) {
	ignored := policyEvaluationErrors.WithLabelValues(SourceController, "trial", "Enforce", "Ignore")
	enforced := policyEvaluationErrors.WithLabelValues(SourceController, "strict", "Enforce", "Fail")
	differs := auditDifferences.WithLabelValues(SourceController, "audit-me")
	b1, b2, b3 := testutil.ToFloat64(ignored), testutil.ToFloat64(enforced), testutil.ToFloat64(differs)
	Controller.Decided(evaluator.Decision{Allocation: evaluator.AllocationAuto, Trace: evaluator.Trace{
		Failures: []evaluator.PolicyFailure{{Policy: "trial", Mode: "Enforce", FailurePolicy: "Ignore", Field: "spec", Error: "boom"}},
		Audit:    []evaluator.AuditRecord{{Policy: "audit-me", Allocation: evaluator.AllocationNone, Differs: true}}}})
	Controller.Decided(evaluator.Decision{Allocation: evaluator.AllocationUnknown, Skip: true, Reason: evaluator.ReasonPolicyError, Policy: "strict"})
	Controller.Decided(evaluator.Decision{Allocation: evaluator.AllocationAuto, Trace: evaluator.Trace{
		Audit: []evaluator.AuditRecord{{Policy: "audit-me", Allocation: evaluator.AllocationAuto}}}})
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"ignored", testutil.ToFloat64(ignored) - b1, 1}, {"enforced", testutil.ToFloat64(enforced) - b2, 1},
		{"audit differences", testutil.ToFloat64(differs) - b3, 1}} {
		if c.got != c.want {
			t.Errorf("%s grew by %v, want %v", c.name, c.got, c.want)
		}
	}
}
