package evaluator_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A Set is safe for concurrent use: decisions made at once, on the shared evaluator
// goroutines, are the decisions made one at a time (run with -race to check the sharing).
func TestConcurrentDecisionsAreTheSequentialOnes(t *testing.T) {
	set := defaultSet(t, newCompiler(t))
	missing := pooledStatic()
	missing.IPAddress = evaluator.IPAddress{Name: "web"}
	inputs := []evaluator.Input{pooledAuto(), pooledStatic(), missing}
	want := make([]evaluator.Decision, len(inputs))
	for i, in := range inputs {
		want[i] = set.Decide(context.Background(), in, evaluator.Options{Explain: true})
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 30 {
				i := (g + n) % len(inputs)
				if got := set.Decide(context.Background(), inputs[i], evaluator.Options{Explain: true}); !reflect.DeepEqual(got, want[i]) {
					t.Errorf("input %d: concurrent decision %+v, want %+v", i, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}
