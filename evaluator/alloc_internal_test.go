package evaluator

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vmipam/vmipam/policies"
)

// The hot path of a decision allocates only what the evaluation needs: checking an input
// within its bounds allocates nothing (it built a path string for every field and map entry,
// and read the struct tags, on every decision).
func TestCheckingAnInputWithinItsBoundsAllocatesNothing(t *testing.T) {
	in := Input{
		VM: VM{Name: "vm-a", Labels: map[string]string{"app": "web", "tier": "1"},
			Annotations: map[string]string{"note": "x"}},
		Holders: Holders{VMs: []string{"vm-b", "vm-c"}},
	}
	in.normalize()
	if err := in.checkBounds(); err != nil {
		t.Fatalf("checkBounds = %v, want nil", err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = in.checkBounds() }); n != 0 {
		t.Errorf("checkBounds allocates %.0f times per call, want 0", n)
	}
}

// Evaluations reuse idle evaluator goroutines (whose stacks the interpreter has grown)
// instead of starting one per decision.
func TestDecisionsReuseIdleEvaluators(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	builtin, errs := c.Compile(b, b)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	set := NewSet(nil, builtin)
	set.Decide(context.Background(), Input{}, Options{})
	before := evaluatorsStarted.Load()
	for range 100 {
		set.Decide(context.Background(), Input{}, Options{})
	}
	// Another test's evaluator may end meanwhile; one started evaluator per decision is the fault.
	if started := evaluatorsStarted.Load() - before; started > 10 {
		t.Errorf("100 decisions one after the other started %d evaluators, want them to reuse an idle one", started)
	}
}

// At most maxIdleEvaluators wait idle; the others end with their evaluation.
func TestIdleEvaluatorsAreBounded(t *testing.T) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	n := maxIdleEvaluators + 8
	wg.Add(n)
	for range n {
		runEvaluation(func() { wg.Done(); <-release })
	}
	wg.Wait() // all n run at once, each on its own evaluator
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for idleEvaluators.Load() != maxIdleEvaluators && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if idle := idleEvaluators.Load(); idle != maxIdleEvaluators {
		t.Errorf("%d evaluators idle after %d finished, want %d", idle, n, maxIdleEvaluators)
	}
}
