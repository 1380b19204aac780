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
