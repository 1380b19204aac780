package policy

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// nextChange returns the next published change. Changes are delivered by the registry's
// pump; a test that expects one more than were published hangs until the test binary's
// deadline instead of passing.
func nextChange(r *Registry) *v1alpha1.ClusterIPAMPolicy {
	return (<-r.Changes()).Object.(*v1alpha1.ClusterIPAMPolicy)
}

func TestRegistryAnnouncesWhatServesAndNameOnlyRemovals(t *testing.T) {
	r := newTestRegistry(t)
	p := policyObj("p", "uid-1", 2, goodSpec())
	compiled, errs := r.Compiler().Compile(p, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	r.Put(p, compiled)
	if got := nextChange(r); got == nil || got.Generation != 2 || got.Spec.Priority != 10 {
		t.Errorf("Put announced %+v, want the serving object", got)
	}
	r.Remove("other")
	r.Remove("p")
	got := nextChange(r) // "other" would come first, had it been announced
	if got == nil || got.Name != "p" || got.Generation != 0 || !got.CreationTimestamp.IsZero() {
		t.Errorf("Remove announced %+v, want a name-only object for p", got)
	}
	if names := r.Set().Policies(); len(names) != 0 {
		t.Errorf("snapshot policies = %v after Remove", names)
	}
}

// TestRegistryNeverDropsChangesAndCoalescesPerPolicy: while nobody reads, changes are kept
// (not dropped once a buffer is full, as they were beyond 64), and several changes of one policy
// arrive as its newest.
func TestRegistryNeverDropsChangesAndCoalescesPerPolicy(t *testing.T) {
	r := newTestRegistry(t)
	const policies = 200
	for i := range policies {
		for gen := int64(1); gen <= 3; gen++ {
			p := policyObj(fmt.Sprintf("p%03d", i), types.UID(fmt.Sprint("uid-", i)), gen, goodSpec())
			compiled, errs := r.Compiler().Compile(p, p)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			r.Put(p, compiled)
		}
	}
	for i := range policies {
		got := nextChange(r)
		if want := fmt.Sprintf("p%03d", i); got.Name != want || got.Generation != 3 {
			t.Fatalf("change %d = %s generation %d, want %s generation 3", i, got.Name, got.Generation, want)
		}
	}
	r.Remove("p000")
	if got := nextChange(r); got.Name != "p000" || got.Generation != 0 {
		t.Errorf("after draining: %s generation %d, want the name-only removal of p000", got.Name, got.Generation)
	}
}
