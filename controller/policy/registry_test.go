package policy

import (
	"testing"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// nextChange returns the next published change, or nil when none is pending.
func nextChange(r *Registry) *v1alpha1.ClusterIPAMPolicy {
	select {
	case e := <-r.Changes():
		return e.Object.(*v1alpha1.ClusterIPAMPolicy)
	default:
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
	if got := nextChange(r); got == nil || got.Generation != 2 || got.Spec.Priority != 10 {
		t.Errorf("Put announced %+v, want the serving object", got)
	}
	r.Remove("other")
	if got := nextChange(r); got != nil {
		t.Errorf("removing a policy that does not serve announced %s", got.Name)
	}
	r.Remove("p")
	got := nextChange(r)
	if got == nil || got.Name != "p" || got.Generation != 0 || !got.CreationTimestamp.IsZero() {
		t.Errorf("Remove announced %+v, want a name-only object", got)
	}
	if names := r.Set().Policies(); len(names) != 0 {
		t.Errorf("snapshot policies = %v after Remove", names)
	}
}
