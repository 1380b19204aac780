package policy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// fixture is one API server (the fake client) and a way to run a controller process against it.
type fixture struct {
	t      *testing.T
	client client.Client
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.ClusterIPAMPolicy{}).Build()
	return &fixture{t: t, client: c}
}

// process returns a reconciler with an empty registry: a controller (re)start.
func (f *fixture) process() *Reconciler {
	return &Reconciler{Client: f.client, Registry: newTestRegistry(f.t)}
}

func (f *fixture) reconcile(r *Reconciler, name string) {
	f.t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
		f.t.Fatalf("Reconcile(%s): %v", name, err)
	}
}

func (f *fixture) get(name string) *v1alpha1.ClusterIPAMPolicy {
	f.t.Helper()
	p := &v1alpha1.ClusterIPAMPolicy{}
	if err := f.client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// edit changes the stored policy's spec as a new generation (the fake client does not count
// generations).
func (f *fixture) edit(name string, spec v1alpha1.ClusterIPAMPolicySpec) {
	f.t.Helper()
	p := f.get(name)
	p.Spec, p.Generation = spec, p.Generation+1
	if err := f.client.Update(context.Background(), p); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) setAnnotation(name, value string, present bool) {
	f.t.Helper()
	p := f.get(name)
	if present {
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, AnnotationLastGood, value)
	} else {
		delete(p.Annotations, AnnotationLastGood)
	}
	if err := f.client.Update(context.Background(), p); err != nil {
		f.t.Fatal(err)
	}
}

// expect checks status.servingGeneration, the Ready condition and what the registry serves.
func (f *fixture) expect(r *Reconciler, name string, serving int64, ready metav1.ConditionStatus, msgParts ...string) {
	f.t.Helper()
	p := f.get(name)
	if p.Status.ObservedGeneration != p.Generation {
		f.t.Errorf("observedGeneration = %d, want %d", p.Status.ObservedGeneration, p.Generation)
	}
	if p.Status.ServingGeneration != serving {
		f.t.Errorf("servingGeneration = %d, want %d", p.Status.ServingGeneration, serving)
	}
	c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != ready {
		f.t.Fatalf("Ready = %+v, want status %s", c, ready)
	}
	for _, part := range msgParts {
		if !strings.Contains(c.Message, part) {
			f.t.Errorf("Ready message %q does not contain %q", c.Message, part)
		}
	}
	var got int64
	if s := r.Registry.Serving(name); s != nil {
		got = s.Generation
	}
	if got != serving {
		f.t.Errorf("registry serves generation %d, want %d", got, serving)
	}
}

// stored returns the generation and spec recorded in the annotation.
func (f *fixture) stored(name string) (lastGood, bool) {
	f.t.Helper()
	raw, ok := f.get(name).Annotations[AnnotationLastGood]
	if !ok {
		return lastGood{}, false
	}
	var lg lastGood
	if err := json.Unmarshal([]byte(raw), &lg); err != nil {
		f.t.Fatalf("annotation: %v", err)
	}
	return lg, true
}

func TestCompilingGenerationServesAndIsRecorded(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	r := f.process()
	f.reconcile(r, "p")
	f.expect(r, "p", 1, metav1.ConditionTrue, "Generation 1 compiled and serves")
	lg, ok := f.stored("p")
	if !ok || lg.Generation != 1 || lg.Spec.SkipRules[0].Reason != "Held" {
		t.Errorf("annotation = %+v (present %v), want generation 1 and its spec", lg, ok)
	}
}

func TestFailingGenerationKeepsLastGoodServing(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	r := f.process()
	f.reconcile(r, "p")
	f.edit("p", badSpec())
	f.reconcile(r, "p")
	f.expect(r, "p", 1, metav1.ConditionFalse, "generation 2 does not compile", "spec.skipRules[0].expression",
		"spec.hotplug.expression", "generation 1 keeps serving")
	if lg, _ := f.stored("p"); lg.Generation != 1 {
		t.Errorf("annotation records generation %d, want 1", lg.Generation)
	}
}

func TestFailingGenerationKeepsLastGoodServingAcrossRestart(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	f.reconcile(f.process(), "p")
	f.edit("p", badSpec())

	restarted := f.process()
	f.reconcile(restarted, "p")
	f.expect(restarted, "p", 1, metav1.ConditionFalse, "spec.skipRules[0].expression", "generation 1 keeps serving")
	if got := restarted.Registry.Set().Policies(); len(got) != 1 || got[0] != "p" {
		t.Errorf("snapshot policies = %v, want [p]", got)
	}

	f.edit("p", goodSpec())
	f.reconcile(restarted, "p")
	f.expect(restarted, "p", 3, metav1.ConditionTrue, "Generation 3 compiled")
	if lg, _ := f.stored("p"); lg.Generation != 3 {
		t.Errorf("annotation records generation %d, want 3", lg.Generation)
	}
}

func TestPolicyThatNeverCompiledIsNotUsed(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, badSpec()))
	r := f.process()
	f.reconcile(r, "p")
	f.expect(r, "p", 0, metav1.ConditionFalse, "spec.skipRules[0].expression", "not used until it compiles")
	if _, ok := f.stored("p"); ok {
		t.Error("a policy that never compiled has a last good record")
	}
	if got := r.Registry.Set().Policies(); len(got) != 0 {
		t.Errorf("snapshot policies = %v, want none", got)
	}
}

func TestUnusableRecordIsReportedAndNotServed(t *testing.T) {
	good, err := encodeLastGood(policyObj("p", "uid-1", 1, goodSpec()))
	if err != nil {
		t.Fatal(err)
	}
	brokenStored, err := encodeLastGood(policyObj("p", "uid-1", 1, badSpec()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, value, want string }{
		{"unreadable JSON", "{not json", "is not readable"},
		{"unknown field", `{"generation":1,"spec":{"allocation":{"expression":"'Auto'"},"surprise":1}}`, "is not readable"},
		{"not a previous generation", strings.Replace(good, `"generation":1`, `"generation":7`, 1),
			"records generation 7, which is not a previous generation"},
		{"stored spec does not compile", brokenStored, "stored generation 1 does not compile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policyObj("p", "uid-1", 2, badSpec())
			p.Annotations = map[string]string{AnnotationLastGood: tt.value}
			f := newFixture(t, p)
			r := f.process()
			f.reconcile(r, "p")
			f.expect(r, "p", 0, metav1.ConditionFalse, "the last good generation cannot be restored", tt.want)
			if got := f.get("p").Annotations[AnnotationLastGood]; got != tt.value {
				t.Errorf("annotation changed to %q; an unusable record is left for the admin", got)
			}
		})
	}
}

func TestRemovedRecordIsRewrittenWhileServing(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	r := f.process()
	f.reconcile(r, "p")
	f.edit("p", badSpec())
	f.reconcile(r, "p")

	f.setAnnotation("p", "", false)
	f.reconcile(r, "p")
	if lg, ok := f.stored("p"); !ok || lg.Generation != 1 {
		t.Errorf("annotation = %+v (present %v), want generation 1 restored from memory", lg, ok)
	}

	f.setAnnotation("p", `{"generation":1,"spec":{}}`, true)
	f.reconcile(r, "p")
	if lg, _ := f.stored("p"); lg.Spec.SkipRules[0].Reason != "Held" {
		t.Errorf("an edited record was not replaced by what serves: %+v", lg)
	}
}

func TestRecreatedPolicyDoesNotInheritServingGeneration(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	r := f.process()
	f.reconcile(r, "p")
	if err := f.client.Delete(context.Background(), f.get("p")); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Create(context.Background(), policyObj("p", "uid-2", 1, badSpec())); err != nil {
		t.Fatal(err)
	}
	f.reconcile(r, "p") // the deletion was never observed on its own
	f.expect(r, "p", 0, metav1.ConditionFalse, "not used until it compiles")
}

func TestDeletedPolicyStopsServing(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	r := f.process()
	f.reconcile(r, "p")
	if err := f.client.Delete(context.Background(), f.get("p")); err != nil {
		t.Fatal(err)
	}
	f.reconcile(r, "p")
	if r.Registry.Serving("p") != nil {
		t.Error("a deleted policy still serves")
	}
}

func TestConvergedPolicyIsNotWritten(t *testing.T) {
	f := newFixture(t, policyObj("p", "uid-1", 1, goodSpec()))
	r := f.process()
	f.reconcile(r, "p")
	before := f.get("p").ResourceVersion
	f.reconcile(r, "p")
	f.reconcile(f.process(), "p")
	if after := f.get("p").ResourceVersion; after != before {
		t.Errorf("resourceVersion %s -> %s: a converged policy was written", before, after)
	}
}

func TestStartupLoadServesEveryPolicyBeforeLoadedCloses(t *testing.T) {
	stored, err := encodeLastGood(policyObj("broken", "uid-2", 1, goodSpec()))
	if err != nil {
		t.Fatal(err)
	}
	broken := policyObj("broken", "uid-2", 2, badSpec())
	broken.Annotations = map[string]string{AnnotationLastGood: stored}
	f := newFixture(t, policyObj("good", "uid-1", 4, goodSpec()), broken, policyObj("never", "uid-3", 1, badSpec()))
	r := f.process()
	select {
	case <-r.Registry.Loaded():
		t.Fatal("Loaded is closed before the load")
	default:
	}
	if err := (&loader{client: r.Client, registry: r.Registry}).Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Registry.Loaded():
	default:
		t.Fatal("Loaded is not closed after the load")
	}
	if got := r.Registry.Set().Policies(); strings.Join(got, ",") != "broken,good,default" {
		t.Errorf("snapshot policies = %v, want broken (generation 1), good, and the shipped default the leader is about to store", got)
	}
	if g := r.Registry.Serving("broken").Generation; g != 1 {
		t.Errorf("broken serves generation %d, want the stored 1", g)
	}
	if rv := f.get("good").ResourceVersion; rv != "999" {
		t.Errorf("the load wrote a policy (resourceVersion %s)", rv)
	}
}

func TestConflictRecordingLastGoodIsRetriedQuietly(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(policyObj("p", "uid-1", 1, goodSpec())).
		WithStatusSubresource(&v1alpha1.ClusterIPAMPolicy{}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, o client.Object, p client.Patch, opts ...client.PatchOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("clusteripampolicies").GroupResource(), o.GetName(), errors.New("modified"))
			}
			return c.Patch(ctx, o, p, opts...)
		}}).Build()
	r := &Reconciler{Client: c, Registry: newTestRegistry(t)}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: "p"}}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter != conflictRetry {
		t.Fatalf("Reconcile = %+v, %v; want a quiet retry after %s", res, err, conflictRetry)
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatalf("retry: %v", err)
	}
	f := &fixture{t: t, client: c}
	f.expect(r, "p", 1, metav1.ConditionTrue)
	if lg, ok := f.stored("p"); !ok || lg.Generation != 1 {
		t.Errorf("annotation = %+v (present %v) after the retry", lg, ok)
	}
}

// A generation no earlier generation admitted is checked as new, whatever the webhook did:
// the webhook's failurePolicy is Ignore, so a policy written while it was unavailable reached
// the controller unchecked, and compiled as stored it skipped every check of new expressions
// (issue #15, tester atk9). A generation that compiled before keeps compiling as stored (the
// ratchet across vmipam versions).
func TestUnadmittedGenerationIsCheckedAsNew(t *testing.T) {
	spec := goodSpec()
	spec.SkipRules[0].Expression = "[dyn(vm.name)].sort().size() == 0"
	f := newFixture(t, policyObj("p", "uid-1", 1, spec))
	r := f.process()
	f.reconcile(r, "p")
	f.expect(r, "p", 0, metav1.ConditionFalse, "spec.skipRules[0].expression", "values it cannot order")

	good, err := encodeLastGood(policyObj("q", "uid-2", 1, spec))
	if err != nil {
		t.Fatal(err)
	}
	stored := policyObj("q", "uid-2", 1, spec)
	stored.Annotations = map[string]string{AnnotationLastGood: good}
	f = newFixture(t, stored)
	r = f.process()
	f.reconcile(r, "q")
	f.expect(r, "q", 1, metav1.ConditionTrue, "Generation 1 compiled")
}
