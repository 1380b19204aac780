package evaluator_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// costly is an expression of ~80,000 units that evaluates to false.
const costly = "[" + hundred + "].exists(i, [" + hundred + "].exists(j, i == j + 1000))"

const hundred = "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29," +
	"30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49,50,51,52,53,54,55,56,57,58,59," +
	"60,61,62,63,64,65,66,67,68,69,70,71,72,73,74,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89," +
	"90,91,92,93,94,95,96,97,98,99"

// What a policy that may not decide (Audit) or may not take the interface down (failurePolicy
// Ignore) spends is charged to the trial account: it never makes an enforced policy (here the
// built-in default) exceed the interface budget and be blamed for it. Before, both drew on
// one budget, and the enforced policy failed with "interface cost budget exceeded".
func TestTrialPoliciesDoNotSpendTheEnforcedBudget(t *testing.T) {
	// Each account holds what its policies spend (an Audit record re-evaluates the enforced
	// policy's rule too), not both together.
	// A long deadline: the test is about accounts, and a starved run once hit the 1 s default.
	limits := evaluator.Limits{InterfaceCostBudget: 100_000, TrialCostBudget: 200_000, Deadline: 30 * time.Second}
	enforcer := layer("enforcer", priority(200), skipRule("e", costly, "PolicyError", "", ""))
	cases := map[string]policyOption{
		"an Ignore policy's skip rules": func(p *v1alpha1.ClusterIPAMPolicy) {
			ignoreErrors(p)
			skipRule("a", costly, "PolicyError", "", "")(p)
		},
		"an Audit policy's matchConditions and record": func(p *v1alpha1.ClusterIPAMPolicy) {
			audit(p)
			matchCondition("a", "!("+costly+")")(p)
			hotplug("true")(p)
		},
	}
	for name, opt := range cases {
		t.Run(name, func(t *testing.T) {
			d := decide(setOf(t, compilerWith(t, limits), layer("trial", opt), enforcer), pooledAuto())
			if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != evaluator.BuiltinPolicy ||
				d.Allocation != evaluator.AllocationAuto || len(d.Trace.Errors) > 0 {
				t.Fatalf("decision = %+v, want the built-in default's Auto, no error", d)
			}
			if d.Cost < 150_000 {
				t.Errorf("Cost = %d, want what both accounts spent (over 150,000)", d.Cost)
			}
		})
	}
}

// Crossing the trial budget is the error of the trial policy that crossed it: an Ignore
// policy is passed over, an Audit policy's record holds the error; the enforced policies
// decide as if it were not there.
func TestATrialPolicyOverTheTrialBudgetIsItsOwnError(t *testing.T) {
	// A raised per-call limit lets the policy's estimates sum past the budgets.
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e6, PerCallCostLimit: 1e6,
		InterfaceCostBudget: 100_000, TrialCostBudget: 100_000})
	two := func(p *v1alpha1.ClusterIPAMPolicy) {
		for _, n := range []string{"a", "b"} {
			skipRule(n, costly, "PolicyError", "", "")(p)
		}
	}
	t.Run("Ignore", func(t *testing.T) {
		d := decide(setOf(t, c, layer("trial", ignoreErrors, two)), pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != evaluator.BuiltinPolicy ||
			len(d.Trace.Ignored) != 1 || d.Trace.Ignored[0] != "trial" ||
			len(d.Trace.Errors) != 1 || !strings.Contains(d.Trace.Errors[0], "policy trial: spec.skipRules[") ||
			!strings.Contains(d.Trace.Errors[0], "trial cost budget 100000 exceeded") {
			t.Fatalf("decision = %+v, want trial passed over for the trial budget, the built-in default deciding", d)
		}
	})
	t.Run("Audit", func(t *testing.T) {
		d := decide(setOf(t, c, layer("trial", audit, two)), pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != evaluator.BuiltinPolicy {
			t.Fatalf("decision = %+v, want the built-in default deciding", d)
		}
		if len(d.Trace.Audit) != 1 || !strings.Contains(d.Trace.Audit[0].Error, "policy trial: ") ||
			!strings.Contains(d.Trace.Audit[0].Error, "trial cost budget 100000 exceeded") {
			t.Fatalf("Audit = %+v, want trial's record to hold the trial budget's error", d.Trace.Audit)
		}
	})
}

// An Audit record re-evaluates the enforced policies as well: what that costs is the record's,
// and crossing the trial budget there is the Audit policy's error, never the enforced
// policy's whose expression happened to cross it.
func TestAnAuditRecordPaysForItsReevaluation(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e6, PerCallCostLimit: 1e6,
		InterfaceCostBudget: 200_000, TrialCostBudget: 100_000})
	enforcer := layer("enforcer", priority(200), skipRule("a", costly, "PolicyError", "", ""),
		skipRule("b", costly, "PolicyError", "", ""))
	d := decide(setOf(t, c, layer("trial", audit, hotplug("true")), enforcer), pooledAuto())
	if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != evaluator.BuiltinPolicy {
		t.Fatalf("decision = %+v, want the built-in default deciding", d)
	}
	if len(d.Trace.Audit) != 1 || !strings.HasPrefix(d.Trace.Audit[0].Error, "policy trial: spec: evaluating its Audit record (at policy enforcer: spec.skipRules[1].expression): trial cost budget 100000 exceeded") {
		t.Fatalf("Audit = %+v, want trial's record to hold the trial budget's error", d.Trace.Audit)
	}
}

// Once an account is spent nothing more runs on it in that attempt. Here first and second
// each cross the trial budget alone and are passed over; every retry starts from the
// accounts before the first attempt, so third, which fits alone, decides hotplug; the work on
// the interface is its three attempts, each within both budgets and one expression past.
func TestNothingRunsOnASpentAccount(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e6, PerCallCostLimit: 1e6,
		InterfaceCostBudget: 100_000, TrialCostBudget: 100_000})
	first := layer("first", priority(1), ignoreErrors, skipRule("a", costly, "X", "m", ""), skipRule("b", costly, "X", "m", ""))
	second := layer("second", priority(2), ignoreErrors, skipRule("c", costly, "X", "m", ""), skipRule("d", costly, "X", "m", ""))
	third := layer("third", priority(3), ignoreErrors, hotplug("false"), skipRule("e", costly, "X", "m", ""))
	d := decide(setOf(t, c, first, second, third), pooledAuto())
	if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Hotplug != "third" ||
		strings.Join(d.Trace.Ignored, ",") != "first,second" {
		t.Fatalf("decision = %+v, want first and second passed over and third deciding hotplug", d)
	}
	// One costly expression alone: what a budget may be crossed by.
	one := decide(setOf(t, c, layer("one", priority(1), ignoreErrors, skipRule("a", costly, "X", "m", ""))), pooledAuto()).Cost
	if bound := 3 * (100_000 + one); d.Cost > bound {
		t.Errorf("Cost = %d, want at most three attempts of the trial budget and one expression past it (%d)", d.Cost, bound)
	}
}

// A trial policy never makes an enforced one fail (issue #29): every retry after passing a
// failing Ignore policy over starts from the enforced account as it was before the first
// attempt. Here the enforced policy spends ~160,000 of the 300,000 interface budget and N
// cheap Ignore policies fail on a missing label, one after the other. Before, each retry
// charged the enforced policy again: with two, it failed with "interface cost budget 300000
// exceeded (spent 326414, …)". Past maxIgnoreRetries, the Ignore policies left are passed over
// unevaluated, and the enforced one still decides.
func TestATrialPolicyNeverMakesAnEnforcedOneFail(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{})
	enforcer := layer("enforcer", priority(200), hotplug("false"),
		skipRule("a", costly, "PolicyError", "", ""), skipRule("b", costly, "PolicyError", "", ""))
	const retries = 8 // evaluator's maxIgnoreRetries
	for _, n := range []int{1, 2, 3, retries, retries + 1, retries + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ps := []*v1alpha1.ClusterIPAMPolicy{enforcer}
			for i := range n {
				ps = append(ps, layer(fmt.Sprintf("trial-%02d", i), priority(int32(i)), ignoreErrors,
					hotplug("vm.labels['missing'] == 'x'")))
			}
			d := decide(setOf(t, c, ps...), pooledAuto())
			if d.Reason == evaluator.ReasonPolicyError || d.Provenance.Hotplug != "enforcer" || d.Hotplug {
				t.Fatalf("decision = %s %q (hotplug by %q), want the enforcer deciding", d.Reason, d.Message, d.Provenance.Hotplug)
			}
			if len(d.Trace.Ignored) != n {
				t.Errorf("Ignored = %q, want all %d trial policies", d.Trace.Ignored, n)
			}
			if n > retries+1 && !strings.Contains(strings.Join(d.Trace.Errors, "\n"), "passed over without being evaluated") {
				t.Errorf("errors %q, want the policies past the retries passed over unevaluated", d.Trace.Errors)
			}
		})
	}
}

// When enforced policies together spend the interface budget, the expression that crosses it
// fails (the budget holds), but its error names the policies that spent it, biggest first,
// with their spend: here two costly policies, while a few units of a built-in policy
// evaluated after them cross it. Before, the error read "policy builtin:default: …: interface
// cost budget … exceeded (spent …)" and sent the operator to the default.
func TestTheBudgetErrorNamesThePoliciesThatSpentIt(t *testing.T) {
	set := func(budget int64) *evaluator.Set {
		return setOf(t, compilerWith(t, evaluator.Limits{InterfaceCostBudget: budget}),
			layer("first", priority(1), skipRule("a", costly, "PolicyError", "", "")),
			layer("second", priority(2), skipRule("b", costly, "PolicyError", "", "")))
	}
	within := decide(set(1_000_000), pooledAuto())
	if within.Reason == evaluator.ReasonPolicyError {
		t.Fatalf("within the budget: %q", within.Message)
	}
	// One unit less than the whole evaluation spends: the last expression evaluated, a
	// built-in policy's, crosses it.
	d := decide(set(within.Cost-1), pooledAuto())
	if d.Reason != evaluator.ReasonPolicyError || strings.HasPrefix(d.Message, "policy first") || strings.HasPrefix(d.Message, "policy second") {
		t.Fatalf("decision = %s %q, want a PolicyError of a built-in policy for the budget", d.Reason, d.Message)
	}
	first, second := regexp.MustCompile(`policy first [0-9]{5}`).FindStringIndex(d.Message), regexp.MustCompile(`policy second [0-9]{5}`).FindStringIndex(d.Message)
	if !strings.Contains(d.Message, "interface cost budget") || first == nil || second == nil ||
		!strings.Contains(d.Message, "the policies evaluated before this one share the budget") {
		t.Errorf("message %q, want the budget and both policies that spent it, with their costs", d.Message)
	}
}

// A retry after passing an Ignore policy over starts from the accounts as they were before the
// first attempt: the policies evaluated again are not charged twice. Here "first" (two
// costly rules, ~160,000 units, within the 200,000 trial budget alone) and "second" (one more)
// cross the budget in second's rule; second is passed over, and first — which fits alone —
// decides hotplug. Before, the retry inherited the ~240,000 units the failed attempt spent, so
// first failed at its first rule and was passed over too (the tester's ta3/tb3 of issue #15).
func TestARetryDoesNotInheritTheFailedAttemptsSpend(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e6, PerCallCostLimit: 1e6,
		InterfaceCostBudget: 200_000, TrialCostBudget: 200_000})
	first := layer("first", priority(1), ignoreErrors, hotplug("false"),
		skipRule("a", costly, "X", "m", ""), skipRule("b", costly, "X", "m", ""))
	second := layer("second", priority(2), ignoreErrors, skipRule("c", costly, "X", "m", ""))
	d := decide(setOf(t, c, first, second), pooledAuto())
	if d.Reason == evaluator.ReasonPolicyError || d.Hotplug || d.Provenance.Hotplug != "first" ||
		len(d.Trace.Ignored) != 1 || d.Trace.Ignored[0] != "second" {
		t.Fatalf("decision = %+v, want second passed over and first deciding hotplug", d)
	}
	// The failed attempt's work is still reported: ~240,000 and the retry's ~160,000.
	if d.Cost < 350_000 {
		t.Errorf("Cost = %d, want both attempts' spend (over 350,000)", d.Cost)
	}
}
