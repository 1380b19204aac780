package metrics_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vmipam/vmipam/controller/metrics"
)

// A record counts once its current generation has gone unobserved for longer than
// UnobservedAfter; an observation, a new generation (timed anew) or its deletion takes it out.
func TestRecordsUnobservedForAMinuteAreCounted(t *testing.T) {
	now := time.Unix(1000, 0)
	r := metrics.NewRecordObservation(func() time.Time { return now })
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	r.Observe(a, 2, 1)
	r.Observe(b, 1, 1)
	now = now.Add(metrics.UnobservedAfter)
	if n := r.Unobserved(); n != 0 {
		t.Errorf("at the minute: %d unobserved, want 0", n)
	}
	now = now.Add(time.Second)
	if n := r.Unobserved(); n != 1 {
		t.Errorf("past the minute: %d unobserved, want a", n)
	}
	r.Observe(a, 2, 1) // the same generation again: still timed from its first sight
	if n := r.Unobserved(); n != 1 {
		t.Errorf("a second event of the same generation: %d unobserved, want 1", n)
	}
	r.Observe(a, 3, 1) // a new generation is timed anew
	if n := r.Unobserved(); n != 0 {
		t.Errorf("a new generation: %d unobserved, want 0", n)
	}
	now = now.Add(2 * metrics.UnobservedAfter)
	r.Observe(b, 2, 1)
	r.Forget(a)
	if n := r.Unobserved(); n != 0 {
		t.Errorf("a forgotten and b just changed: %d unobserved, want 0", n)
	}
	r.Observe(b, 2, 2)
	now = now.Add(2 * metrics.UnobservedAfter)
	if n := r.Unobserved(); n != 0 {
		t.Errorf("b observed: %d unobserved, want 0", n)
	}
}
