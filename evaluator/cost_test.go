package evaluator_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// compilerWith returns a compiler with the given limits (zero fields take the defaults).
func compilerWith(t testing.TB, l evaluator.Limits) *evaluator.Compiler {
	t.Helper()
	c, err := evaluator.NewCompiler(l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLimitsZeroFieldsTakeTheDefaults(t *testing.T) {
	got := compilerWith(t, evaluator.Limits{CheckFrequency: 42}).Limits()
	want := evaluator.DefaultLimits
	want.CheckFrequency = 42
	if got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
}

// The static estimate works from the declared bounds of the inputs (the maxSize tags of
// input.go). vm.labels holds at most 64 entries, so a nested comprehension over it costs at
// most ~152,000 units; the same over a list whose size the estimator cannot bound, such as
// the result of split(), is estimated at the maximum uint64 and rejected. holders.vms is
// bounded (256) but a nested comprehension over it is estimated at ~2,000,000: above the
// default limit, under a raised one.
func TestStaticCostEstimate(t *testing.T) {
	nested := func(list string) string {
		return fmt.Sprintf("%s.all(a, %s.exists(b, a == b))", list, list)
	}
	cases := []struct {
		name   string
		limit  uint64 // 0: the default, 1e6
		expr   string
		reject bool
	}{
		{"a single pass over a bounded map is accepted", 0, "vm.labels.all(a, vm.labels[a] != '')", false},
		{"nested over a bounded map exceeds the per-call limit", 0, nested("vm.labels"), true},
		{"nested over an unbounded list is rejected", 0, nested("vm.name.split(',')"), true},
		{"nested over dyn is rejected", 0, nested("dyn(vm.labels)"), true},
		{"nested over holders.vms exceeds the default limit", 0, nested("holders.vms"), true},
		{"nested over holders.vms fits a raised limit", 3_000_000, nested("holders.vms"), false},
		{"a single pass over holders.vms is accepted", 0, "holders.vms.exists(v, v == vm.name)", false},
		{"nested over a variable list (bounded at 1024) is rejected", 0,
			"variables.l.all(a, variables.l.exists(b, a == b))", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := compilerWith(t, evaluator.Limits{StaticCostLimit: tc.limit, PerCallCostLimit: tc.limit})
			p := newPolicy("p", variable("l", "holders.vms"), skipRule("r", tc.expr, "Dup", "", ""))
			_, errs := c.Compile(p, nil)
			rejected := len(errs) == 1 && errs[0].Field == "spec.skipRules[0].expression" &&
				strings.Contains(errs[0].Error(), "estimated worst-case cost")
			if rejected != tc.reject || (!tc.reject && len(errs) > 0) {
				t.Errorf("Compile errors = %v, want rejected = %v by the cost estimate", errs, tc.reject)
			}
		})
	}
}

// lotsOfHolders is an input whose holders.vms has n names (at most 256 are within bounds).
func lotsOfHolders(n int) evaluator.Input {
	in := pooledAuto()
	for i := range n {
		in.Holders.VMs = append(in.Holders.VMs, fmt.Sprintf("vm-%d", i))
	}
	return in
}

// bigVariable declares v0 … v<n>, each the previous list concatenated with itself: v<n> holds
// 16·2ⁿ ints at a CEL cost of n (at most 1024 — v6 —: a variable's value is held to the bound
// the static estimate assumes; TestVariablesBeyondTheEstimatedBoundFailClosed).
func bigVariable(n int) []policyOption {
	opts := []policyOption{variable("v0", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]")}
	for i := 1; i <= n; i++ {
		opts = append(opts, variable(fmt.Sprintf("v%d", i), fmt.Sprintf("variables.v%d + variables.v%d", i-1, i-1)))
	}
	return opts
}

func TestRuntimeLimitsAreErrors(t *testing.T) {
	unlimited := evaluator.Limits{StaticCostLimit: 1 << 62, PerCallCostLimit: 1 << 62,
		InterfaceCostBudget: 1 << 62, Deadline: time.Hour}
	perCall, budget, deadline := unlimited, unlimited, unlimited
	perCall.PerCallCostLimit = 50_000
	budget.InterfaceCostBudget, budget.TrialCostBudget = 1000, 1000
	deadline.Deadline = time.Millisecond
	scan := func(n int) string { return fmt.Sprintf("variables.v%d.all(x, x >= 0)", n) }
	// A million iterations over 1024-entry variables: under the raised static limits, only
	// the runtime limits stop it.
	nested := "variables.v6.all(x, variables.v6.all(y, x >= y || x < y))"
	// The static limit is the per-call limit too, so only an underestimate reaches the
	// per-call limit: format() of a nested collection in a stored expression (a new one is
	// refused), estimated at a variable's flat bound (docs/CEL-LIBRARY.md), ~1 MB for 1,024
	// lists of 256 ints: format() refuses, before formatting, arguments that format to more
	// than the per-call limit can pay for; CEL's own limit error is accepted too.
	formats := "'%s'.format([variables.n]) != ''"
	cases := []struct {
		name   string
		limits evaluator.Limits
		opts   []policyOption
		detail string
	}{
		{"the per-call cost limit", perCall, append(bigVariable(6), variable("n", "variables.v6.map(x, variables.v4)"), matchCondition("m", formats)),
			"actual cost limit exceeded|format(): the arguments format to more than 500000 characters"},
		{"the interface cost budget, over several cheap expressions", budget,
			append(bigVariable(4), matchCondition("m1", scan(4)), matchCondition("m2", scan(4)), matchCondition("m3", scan(4))),
			"cost budget 1000 exceeded"},
		{"the deadline, inside a long comprehension", deadline, append(bigVariable(6), matchCondition("m", nested)),
			// "operation interrupted: …" inside, "not evaluated: …" when it expired before; on a
			// loaded machine the interrupted goroutine may not run again within Decide's grace,
			// and the evaluation is abandoned (still an error naming heavy's expression).
			"context deadline exceeded|did not finish within the deadline"},
	}
	for _, tc := range cases {
		for _, fp := range []v1alpha1.FailurePolicy{v1alpha1.FailurePolicyFail, v1alpha1.FailurePolicyIgnore} {
			t.Run(tc.name+" under "+string(fp), func(t *testing.T) {
				c := compilerWith(t, tc.limits)
				p := newPolicy("heavy", append(tc.opts, priority(1), func(p *v1alpha1.ClusterIPAMPolicy) {
					p.Spec.FailurePolicy = fp
				})...)
				d := decide(setOf(t, c, p, newPolicy("light", priority(2), allocation("'None'"))), pooledAuto())
				checkLimitDecision(t, d, fp, tc.detail)
				// Only a failure for want of time is DeadlineExceeded, which the controller
				// retries before publishing; a cost failure is the policy's every time. Under
				// Ignore, the evaluation without heavy has a 1 ms deadline of its own, which a
				// loaded machine can miss too: then it failed for want of time as well.
				want := tc.limits.Deadline != time.Hour && d.Reason == evaluator.ReasonPolicyError
				if d.DeadlineExceeded != want {
					t.Errorf("DeadlineExceeded = %v, want %v", d.DeadlineExceeded, want)
				}
			})
		}
	}
}

// checkLimitDecision checks that a limit hit by policy heavy is an error: a PolicyError skip
// under Fail; under Ignore heavy is passed over with its error in the trace, and whatever
// decides next is never a made-up false.
func checkLimitDecision(t *testing.T, d evaluator.Decision, fp v1alpha1.FailurePolicy, detail string) {
	t.Helper()
	// The matchCondition or one of the variables it reads (evaluated lazily, inside it) fails:
	// which one a deadline hits depends on the machine's speed, not on the behaviour.
	first := ""
	if len(d.Trace.Errors) > 0 {
		first = d.Trace.Errors[0]
	}
	if !strings.HasPrefix(first, "policy heavy: spec.matchConditions[") && !strings.HasPrefix(first, "policy heavy: spec.variables[") ||
		!slices.ContainsFunc(strings.Split(detail, "|"), func(s string) bool { return strings.Contains(first, s) }) {
		t.Fatalf("Trace.Errors = %q, want heavy's matchCondition (or a variable it reads) to fail with %q", d.Trace.Errors, detail)
	}
	switch {
	case fp == v1alpha1.FailurePolicyFail:
		if d.Policy != "heavy" || d.Reason != evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationUnknown {
			t.Errorf("decision = %+v, want heavy's PolicyError", d)
		}
	case d.Reason == evaluator.ReasonPolicyError:
		// The budget and the deadline are per interface: once spent, the next policies
		// fail too, and the interface still ends in an error, never in a decision.
		// An abandoned evaluation ends at once, with its one error.
		if d.Allocation != evaluator.AllocationUnknown || len(d.Trace.Errors) < 2 && !strings.Contains(first, "abandoned") {
			t.Errorf("decision = %+v, want an error decision after heavy was passed over", d)
		}
	default:
		if d.Policy != "light" || d.Allocation != evaluator.AllocationNone {
			t.Errorf("decision = %+v, want light to decide after heavy was passed over", d)
		}
	}
}

func TestAnExpiredContextIsAnError(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	d := defaultSet(t, newCompiler(t)).Decide(ctx, pooledAuto(), evaluator.Options{})
	if d.Allocation != evaluator.AllocationUnknown || d.Reason != evaluator.ReasonPolicyError ||
		!strings.Contains(d.Message, "not evaluated: "+context.DeadlineExceeded.Error()) {
		t.Errorf("decision = %+v, want a PolicyError naming the deadline", d)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("test setup: the context should have expired")
	}
}

func TestCostIsReported(t *testing.T) {
	c := newCompiler(t)
	cheap := decide(setOf(t, c, newPolicy("p", matchCondition("m", "true"))), lotsOfHolders(100))
	scan := decide(setOf(t, c, newPolicy("p", matchCondition("m", "holders.vms.all(v, v != '')"))), lotsOfHolders(100))
	if cheap.Cost < 0 || scan.Cost <= cheap.Cost+100 {
		t.Errorf("cost = %d for a constant, %d for a scan of 100 names; want the scan to cost more than 100 more",
			cheap.Cost, scan.Cost)
	}
	explained := setOf(t, c, newPolicy("p", matchCondition("m", "true"))).Decide(context.Background(),
		lotsOfHolders(100), evaluator.Options{Explain: true})
	if explained.Cost != cheap.Cost || explained.Trace.Input == nil || len(explained.Trace.Input.Holders.VMs) != 100 {
		t.Errorf("cost with Explain = %d, input %v; want %d and the input: explaining is not part of the decision",
			explained.Cost, explained.Trace.Input != nil, cheap.Cost)
	}
}

// A policy's expressions all draw on one interface budget: their estimates are summed and
// the policy refused past it. Before, 16 skip rules each under the per-call limit (~79,000
// each) compiled and exceeded the budget (then 1,000,000) at run time.
func TestAPolicysEstimatesAreSummedAgainstTheInterfaceBudget(t *testing.T) {
	var opts []policyOption
	for i := range 16 {
		opts = append(opts, skipRule(fmt.Sprintf("r%d", i),
			fmt.Sprintf("'p' in vm.annotations && vm.annotations['p'].lowerAscii().upperAscii().contains('Q%d')", i), "X", "m", ""))
	}
	c := newCompiler(t)
	_, errs := c.Compile(newPolicy("p", opts...), nil)
	if len(errs) != 1 || errs[0].Field != "spec" || !strings.Contains(errs[0].Error(), "beyond the interface cost budget 300000") {
		t.Errorf("errors = %v, want the policy refused at spec for the summed estimate", errs)
	}
	if _, errs := c.Compile(newPolicy("p", opts[:3]...), nil); len(errs) > 0 {
		t.Errorf("three of the rules: %v, want them to compile", errs)
	}
}
