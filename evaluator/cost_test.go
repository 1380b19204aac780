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
	if l.Deadline == 0 {
		l.Deadline = testDeadline
	}
	c, err := evaluator.NewCompiler(l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLimitsZeroFieldsTakeTheDefaults(t *testing.T) {
	c, err := evaluator.NewCompiler(evaluator.Limits{CheckFrequency: 42})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Limits()
	want := evaluator.DefaultLimits
	want.CheckFrequency = 42
	if got != want {
		t.Errorf("Limits() = %+v, want %+v", got, want)
	}
}

// The static estimate works from the declared bounds of the inputs (the maxSize tags of
// input.go) and is a sanity check: an expression estimated past the static limit (ten times
// the per-call limit) is refused, one past the per-call limit admitted with a warning at its
// field, since the run time stops it on inputs near the bounds.
func TestStaticCostEstimate(t *testing.T) {
	nested := func(list string) string {
		return fmt.Sprintf("%s.all(a, %s.exists(b, a == b))", list, list)
	}
	fourTimes := func(s string) string { return s + ".lowerAscii().upperAscii().lowerAscii().upperAscii() == 'x'" }
	cases := []struct {
		name    string
		limits  evaluator.Limits
		expr    string
		refused bool
		warned  bool
	}{
		{"a single pass over a bounded map", evaluator.Limits{}, "vm.labels.all(a, vm.labels[a] != '')", false, false},
		{"a single pass over the holders", evaluator.Limits{}, "holders.vms.exists(v, v == vm.name)", false, false},
		{"four traversals of an annotation: past the per-call limit", evaluator.Limits{}, fourTimes("vm.annotations['a']"), false, true},
		{"four traversals of a variable holding one", evaluator.Limits{}, fourTimes("variables.a"), false, true},
		{"nested over the holders: past the static limit", evaluator.Limits{}, nested("holders.vms"), true, false},
		{"nested over a variable of the holders", evaluator.Limits{}, nested("variables.l"), true, false},
		{"within a raised static limit", evaluator.Limits{StaticCostLimit: 1e8}, nested("holders.vms"), false, true},
		{"within raised limits", evaluator.Limits{StaticCostLimit: 1e8, PerCallCostLimit: 1e8}, nested("holders.vms"), false, false},
		{"a range of a computed size", evaluator.Limits{}, "lists.range(interface.index).all(i, vm.labels.all(k, i > 0))", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := compilerWith(t, tc.limits).Compile(newPolicy("p", variable("l", "holders.vms"),
				variable("a", "vm.annotations['a']"), skipRule("r", tc.expr, "Dup", "", "")), nil)
			refused := len(errs) == 1 && errs[0].Field == "spec.skipRules[0].expression" &&
				(strings.Contains(errs[0].Error(), "estimated worst-case cost") || strings.Contains(errs[0].Error(), "no bound on its cost"))
			if refused != tc.refused || (!tc.refused && len(errs) > 0) {
				t.Fatalf("Compile errors = %v, want refused = %v by the cost estimate", errs, tc.refused)
			}
			if tc.refused {
				return
			}
			warned := slices.ContainsFunc(p.Warnings(), func(w evaluator.Warning) bool {
				return w.Field == "spec.skipRules[0].expression" && strings.Contains(w.Message, "exceeds the per-call limit")
			})
			if warned != tc.warned {
				t.Errorf("Warnings = %v, want a warning at the rule = %v", p.Warnings(), tc.warned)
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
// 16·2ⁿ ints (512 for v5, the longest range a comprehension may iterate over).
func bigVariable(n int) []policyOption {
	opts := []policyOption{variable("v0", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]")}
	for i := 1; i <= n; i++ {
		opts = append(opts, variable(fmt.Sprintf("v%d", i), fmt.Sprintf("variables.v%d + variables.v%d", i-1, i-1)))
	}
	return opts
}

// Every run-time limit is an error of the policy whose expression hit it, never a false:
// the per-call limit, the interface budget, the deadline (inside a comprehension), the
// comprehension range bound.
func TestRuntimeLimitsAreErrors(t *testing.T) {
	unlimited := evaluator.Limits{StaticCostLimit: 1 << 62, PerCallCostLimit: 1 << 62,
		InterfaceCostBudget: 1 << 62, Deadline: time.Hour}
	perCall, budget, deadline := unlimited, unlimited, unlimited
	perCall.PerCallCostLimit = 50_000
	budget.InterfaceCostBudget, budget.TrialCostBudget = 1000, 1000
	deadline.Deadline = time.Millisecond
	scan := func(n int) string { return fmt.Sprintf("variables.v%d.all(x, x >= 0)", n) }
	// 262,144 iterations over 512-entry variables: under the raised static limits, only the
	// runtime limits stop it.
	nested := "variables.v5.all(x, variables.v5.all(y, x >= y || x < y))"
	cases := []struct {
		name   string
		limits evaluator.Limits
		opts   []policyOption
		detail string
	}{
		{"the per-call cost limit", perCall, append(bigVariable(5), matchCondition("m", nested)), "actual cost limit exceeded"},
		{"the interface cost budget, over several cheap expressions", budget,
			append(bigVariable(4), matchCondition("m1", scan(4)), matchCondition("m2", scan(4)), matchCondition("m3", scan(4))),
			"cost budget 1000 exceeded"},
		{"the deadline, inside a long comprehension", deadline, append(bigVariable(5), matchCondition("m", nested)),
			// "operation interrupted: …" inside, "not evaluated: …" when it expired before; on a
			// loaded machine the interrupted goroutine may not run again within Decide's grace,
			// and the evaluation is abandoned (still an error naming heavy's expression).
			"context deadline exceeded|did not finish within the deadline"},
		{"the comprehension range", unlimited, append(bigVariable(6), matchCondition("m", scan(6))),
			"a comprehension over 1024 elements, at most 512"},
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

// A policy's expressions all draw on one interface budget: when their estimates sum past it,
// the policy compiles with a warning at spec (the run time stops it on inputs near the
// bounds), each rule within the per-call limit warning nothing.
func TestAPolicysEstimatesAreSummedAgainstTheInterfaceBudget(t *testing.T) {
	var opts []policyOption
	for i := range 16 {
		opts = append(opts, skipRule(fmt.Sprintf("r%d", i),
			fmt.Sprintf("'p' in vm.annotations && vm.annotations['p'].lowerAscii().upperAscii().contains('Q%d')", i), "X", "m", ""))
	}
	c := newCompiler(t)
	p, errs := c.Compile(newPolicy("p", opts...), nil)
	if len(errs) > 0 {
		t.Fatalf("errors = %v, want the policy to compile", errs)
	}
	if w := p.Warnings(); len(w) != 1 || w[0].Field != "spec" || !strings.Contains(w[0].Message, "beyond the interface cost budget 300000") {
		t.Errorf("warnings = %v, want one at spec for the summed estimate", w)
	}
	if p, _ := c.Compile(newPolicy("p", opts[:3]...), nil); p == nil || len(p.Warnings()) > 0 {
		t.Errorf("three of the rules: %v, want them to compile without a warning", p)
	}
}
