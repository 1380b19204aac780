package metrics_test

import (
	"testing"

	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/evaluator"
)

func TestOutcomeNamesWhatHappenedToTheInterface(t *testing.T) {
	cases := []struct {
		d    evaluator.Decision
		want string
	}{
		{evaluator.Decision{Allocation: evaluator.AllocationAuto}, "Auto"},
		{evaluator.Decision{Allocation: evaluator.AllocationNone}, "None"},
		{evaluator.Decision{Allocation: evaluator.AllocationStatic, Skip: true, Reason: evaluator.ReasonIPAddressInUse}, metrics.OutcomeSkipped},
		{evaluator.Decision{Skip: true, Reason: evaluator.ReasonPolicyError}, metrics.OutcomeError},
	}
	for _, tc := range cases {
		if got := metrics.Outcome(tc.d); got != tc.want {
			t.Errorf("Outcome(%+v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
