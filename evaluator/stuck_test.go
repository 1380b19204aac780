package evaluator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// A library call whose work grows with a literal's value, not its length, cannot be
// interrupted by the deadline: comparing quantity('1e9999999') runs for seconds at a reported
// cost in single digits. Decide must still answer on time (the call is abandoned where it
// cannot hold a reconcile worker or a dry-run slot) with a PolicyError naming the deadline.
// Before, Decide returned only when the call did.
func TestDecideAnswersOnTimeDespiteAnUninterruptibleCall(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{Deadline: 20 * time.Millisecond})
	set := setOf(t, c, newPolicy("p", matchCondition("m", "quantity('1e9999999') == quantity('1')")))
	d := decide(set, pooledAuto())
	if d.Allocation != evaluator.AllocationUnknown || d.Reason != evaluator.ReasonPolicyError ||
		!strings.Contains(d.Message, "did not finish within the deadline") {
		t.Errorf("decision = %q %q %q, want a PolicyError naming the deadline", d.Allocation, d.Reason, d.Message)
	}
}
