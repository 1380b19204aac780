package policy

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// nextChange returns the next published change, which the registry's pump delivers; it fails
// the test when none comes within a minute (a change that was lost).
func nextChange(t *testing.T, r *Registry) *v1alpha1.ClusterIPAMPolicy {
	t.Helper()
	select {
	case e := <-r.Changes():
		return e.Object.(*v1alpha1.ClusterIPAMPolicy)
	case <-time.After(time.Minute):
		t.Fatal("no change delivered: it was lost")
		return nil
	}
}

func TestRegistryAnnouncesWhatServesAndNameOnlyRemovals(t *testing.T) {
	r := newTestRegistry(t)
	p := policyObj("p", "uid-1", 2, goodSpec())
	compiled, errs := r.Compiler().Compile(p, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	r.Put(p, compiled)
	if got := nextChange(t, r); got == nil || got.Generation != 2 || got.Spec.Priority != 10 {
		t.Errorf("Put announced %+v, want the serving object", got)
	}
	r.Remove("other")
	r.Remove("p")
	got := nextChange(t, r) // "other" would come first, had it been announced
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
	// Every policy arrives with its newest generation; at most one older change (the one the
	// pump already holds) comes on top.
	newest := map[string]bool{}
	for read := 0; len(newest) < policies; read++ {
		if read > policies {
			t.Fatalf("read %d changes and have the newest of only %d policies", read, len(newest))
		}
		if got := nextChange(t, r); got.Generation == 3 {
			newest[got.Name] = true
		}
	}
	r.Remove("p000")
	if got := nextChange(t, r); got.Name != "p000" || got.Generation != 0 {
		t.Errorf("after draining: %s generation %d, want the name-only removal of p000", got.Name, got.Generation)
	}
}
