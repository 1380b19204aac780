package evaluator_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// nearTheLimits is a policy of 64 skip rules, each a comprehension building a map on every
// iteration (the construct that does the most work per cost unit, BenchmarkCostCalibration)
// over lists.range(n), n as large as the policy still compiles: the rules' estimates sum to
// just under the interface budget. None holds.
func nearTheLimits(t *testing.T, c *evaluator.Compiler, name string, opts ...policyOption) *v1alpha1.ClusterIPAMPolicy {
	t.Helper()
	fifty := "[" + strings.TrimSuffix(strings.Repeat("1,", 50), ",") + "]"
	build := func(n int) *v1alpha1.ClusterIPAMPolicy {
		rules := append([]policyOption(nil), opts...)
		for i := range 64 {
			expr := fmt.Sprintf("lists.range(%d).exists(i, %s.transformMap(k, v, v + i).size() == %d)", n, fifty, 1000+i)
			rules = append(rules, skipRule(fmt.Sprintf("r%d", i), expr, "X", "m", ""))
		}
		return newPolicy(name, rules...)
	}
	lo, hi := 1, 1<<16 // compiles at lo, not at hi
	if _, errs := c.Compile(build(lo), nil); len(errs) > 0 {
		t.Fatalf("the smallest policy is refused: %v", errs.ToAggregate())
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, errs := c.Compile(build(mid), nil); len(errs) > 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return build(lo)
}

// A policy admitted near the limits decides the same on every run: its work is stopped by
// the cost limits (deterministic), never by the deadline (wall time), even with an Audit copy
// spending the trial account too. Before the budgets were calibrated (1,000,000 units each),
// spending them took about as long as the 1 s deadline, and such a policy decided, exceeded
// the budget or hit the deadline from run to run.
func TestAPolicyNearTheLimitsDecidesTheSameEveryRun(t *testing.T) {
	c := newCompiler(t)
	heavy := nearTheLimits(t, c, "heavy", noAllocation)
	shadow := nearTheLimits(t, c, "shadow", noAllocation, audit)
	set := setOf(t, c, heavy, shadow)
	in := pooledAuto()
	key := func(d evaluator.Decision) string {
		return fmt.Sprintf("%s %t %s %s %q %v %q", d.Allocation, d.Skip, d.Reason, d.Policy, d.Message, d.Trace.Audit, d.Trace.Errors)
	}
	// The deadline measures wall time; the guarantee is that the budgets take at most a
	// quarter of it in CPU work, so that the deadline holds with the process getting a
	// quarter of a core. A run that got less (other builds on the two cores) says nothing
	// about the limits, and is skipped; one that hit the deadline with more is a failure.
	timed := func() (evaluator.Decision, time.Duration, time.Duration) {
		cpu := processCPU(t)
		start := time.Now()
		d := decide(set, in)
		return d, time.Since(start), processCPU(t) - cpu
	}
	starved := func(wall, cpu time.Duration) {
		if cpu < wall/4 {
			t.Skipf("the process had %v of CPU in %v: starved; the deadline measures wall time", cpu, wall)
		}
	}
	first, wall, cpu := timed()
	t.Logf("cost %d in %v (%v of CPU): %s", first.Cost, wall, cpu, key(first))
	if first.Reason == evaluator.ReasonPolicyError && first.Policy != "heavy" ||
		strings.Contains(key(first), "deadline") || strings.Contains(key(first), "abandoned") {
		starved(wall, cpu)
		t.Fatalf("decision = %s, want a decision or heavy's own budget error, never the deadline", key(first))
	}
	if first.Cost < evaluator.DefaultLimits.InterfaceCostBudget/2 {
		t.Errorf("Cost = %d, want the policies to spend most of the budgets", first.Cost)
	}
	for range 4 {
		if d, wall, cpu := timed(); key(d) != key(first) {
			starved(wall, cpu)
			if strings.Contains(key(d), "deadline") && !lateOnEveryRun(timed, key, 3) {
				// A load spike, not the limits: the same input was on time when decided
				// again (make test's packages and a fuzzer beside it, load average 10–15).
				t.Skipf("a run ran into the deadline, then was on time when decided again: %s", key(d))
			}
			t.Fatalf("decisions differ between runs:\n%s\n%s", key(first), key(d))
		}
	}
}

// processCPU is the CPU time (user and system) the test process has used so far.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lateOnEveryRun: each of n more runs of timed ran into the deadline too, as work that
// outlasts it does every time; a load spike does not.
func lateOnEveryRun(timed func() (evaluator.Decision, time.Duration, time.Duration), key func(evaluator.Decision) string, n int) bool {
	for range n {
		if d, _, _ := timed(); !strings.Contains(key(d), "deadline") {
			return false
		}
	}
	return true
}
