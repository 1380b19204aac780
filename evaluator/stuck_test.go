package evaluator_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// A library call cannot be interrupted by the deadline: before the guards (guards.go),
// comparing quantity('1e9999999') ran for seconds at a reported cost in single digits. Decide
// must still answer on time, whatever call a guard misses (the call is abandoned where it
// cannot hold a reconcile worker or a dry-run slot), with a PolicyError naming the deadline.
// The stand-in here is one call formatting four million-entry lists under cost limits raised
// out of the way and a 50 ms deadline (plus a 12.5 ms grace): it takes far longer than that on
// any machine. Before, Decide returned only when the call did.
func TestDecideAnswersOnTimeDespiteAnUninterruptibleCall(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{Deadline: 50 * time.Millisecond, StaticCostLimit: 1e12,
		PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12})
	before := evaluator.Abandoned()
	set := setOf(t, c, newPolicy("p", matchCondition("m", "'%s %s %s %s'.format([lists.range(1000000), lists.range(1000000), lists.range(1000000), lists.range(1000000)]) != ''")))
	d := decide(set, pooledAuto())
	if d.Allocation != evaluator.AllocationUnknown || d.Reason != evaluator.ReasonPolicyError ||
		!strings.Contains(d.Message, "did not finish within the deadline") {
		t.Errorf("decision = %q %q %q, want a PolicyError naming the deadline", d.Allocation, d.Reason, d.Message)
	}
	// The trace names the expression that did not finish, the message its policy, not the
	// last policy of the set (it said "policy builtin:default: spec: …", sending an admin to
	// the wrong policy).
	if want := "policy p: spec.matchConditions[0].expression: "; len(d.Trace.Errors) == 0 || !strings.HasPrefix(d.Trace.Errors[0], want) ||
		!strings.HasPrefix(d.Message, "policy p: ") {
		t.Errorf("message = %q, errors %q, want the first error to start with %q", d.Message, d.Trace.Errors, want)
	}
	if evaluator.Abandoned() == before {
		t.Error("Abandoned() did not count the abandoned evaluation")
	}
}

// An abandoned evaluation reports the cost its finished expressions spent. Before: 0.
func TestAnAbandonedEvaluationReportsTheCostSpent(t *testing.T) {
	// A deadline the cheap first condition surely finishes in, even starved beside a busy
	// make test (at 50 ms it once did not); the stuck call runs for seconds.
	c := compilerWith(t, evaluator.Limits{Deadline: 500 * time.Millisecond, StaticCostLimit: 1e12,
		PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12})
	p := newPolicy("p", variable("cheap", "lists.range(500).all(x, x >= 0)"),
		matchCondition("first", "variables.cheap"),
		matchCondition("stuck", "'%s %s %s %s'.format([lists.range(1000000), lists.range(1000000), lists.range(1000000), lists.range(1000000)]) != ''"))
	d := decide(setOf(t, c, p), pooledAuto())
	if !strings.Contains(d.Message, "did not finish within the deadline") || d.Cost < 500 {
		t.Errorf("decision %q cost %d, want the abandoned evaluation's cost ≥ 500 (the first condition's)", d.Message, d.Cost)
	}
}

// A stuck call inside a variable is blamed on the variable, the expression that did not
// finish, not on the expression that read it.
func TestAnAbandonedVariableIsNamed(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{Deadline: 200 * time.Millisecond, StaticCostLimit: 1e12,
		PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12})
	// url() of it: a variable that can hold a formatted string of gigabytes is refused, one
	// whose size the analysis cannot derive (and that reads no input) is not.
	p := newPolicy("slow", variable("big", "url('%s %s %s %s'.format([lists.range(1000000), lists.range(1000000), lists.range(1000000), lists.range(1000000)])).getHost()"),
		matchCondition("m", "variables.big != ''"))
	d := decide(setOf(t, c, p), pooledAuto())
	if want := "policy slow: spec.variables[0].expression: "; len(d.Trace.Errors) == 0 || !strings.HasPrefix(d.Trace.Errors[0], want) {
		t.Errorf("errors = %q, want the first to start with %q", d.Trace.Errors, want)
	}
}

// An Audit policy's call that cannot be interrupted must not take the interface down: an
// Audit policy never decides. Before, the abandoned evaluation answered with a PolicyError
// naming the Audit policy; now the interface is decided again without it and the Audit
// record carries the error.
func TestAnAbandonedAuditPolicyDoesNotDecide(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{Deadline: 200 * time.Millisecond, StaticCostLimit: 1e12,
		PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12})
	trial := newPolicy("trial", audit, matchCondition("m", "'%s %s %s %s'.format([lists.range(1000000), lists.range(1000000), lists.range(1000000), lists.range(1000000)]) != ''"))
	d := decide(setOf(t, c, trial), pooledAuto())
	if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != evaluator.BuiltinPolicy {
		t.Errorf("decision = %s %q, want the built-in default's", d.Reason, d.Message)
	}
	if len(d.Trace.Audit) != 1 || !strings.Contains(d.Trace.Audit[0].Error, "did not finish within the deadline") {
		t.Errorf("audit records = %+v, want trial's abandoned evaluation", d.Trace.Audit)
	}
}
