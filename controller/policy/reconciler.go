package policy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Reconciler compiles ClusterIPAMPolicies into the Registry, keeps each policy's last good
// generation in AnnotationLastGood and writes their status. It runs on the leader; the
// Watcher keeps the Registry current on every replica.
type Reconciler struct {
	Client   client.Client
	Registry *Registry
	// Findings, when set, are the evaluation errors the VM reconciles met, shown as each
	// policy's EvaluatesWithoutErrors condition (at most one write a minute per failing
	// policy); nil shows none.
	Findings *Findings
	// now is the clock (time.Now when nil); tests set it.
	now func() time.Time
}

// Reconcile compiles the policy's current generation. When it compiles it serves and is
// recorded in AnnotationLastGood; when it does not, the last good generation keeps serving —
// from memory, or after a restart from the annotation — and Ready=False lists every error's
// path and names the serving generation. A policy that never compiled is not used. Errors
// are API errors and are retried.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.ClusterIPAMPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.Registry.Remove(req.Name)
			r.Findings.Forget(req.Name)
			metrics.Current.ForgetPolicy(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting ClusterIPAMPolicy %s: %w", req.Name, err)
	}
	if p.DeletionTimestamp != nil {
		r.Registry.Remove(p.Name)
		r.Findings.Forget(p.Name)
		metrics.Current.ForgetPolicy(p.Name)
		return reconcile.Result{}, nil
	}
	out, serving := r.compile(ctx, p)
	metrics.Current.SetPolicy(p.Name, len(out.errs) == 0, len(out.errs) > 0 && out.serving != 0)
	if err := r.persistLastGood(ctx, p, serving, &out); err != nil {
		if apierrors.IsConflict(err) {
			// Someone else wrote the policy since our cache saw it; that write may not
			// trigger us (e.g. a label change), so retry on our own, quietly.
			ctrl.LoggerFrom(ctx).V(1).Info("Policy changed while recording its last good generation; retrying")
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, err
	}
	findings, again := r.Findings.condition(p.Name, out.generation, r.clock())
	return reconcile.Result{RequeueAfter: again}, r.writeStatus(ctx, p, out, findings)
}

func (r *Reconciler) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// conflictRetry is how soon a reconcile that lost an optimistic-concurrency race runs again.
const conflictRetry = time.Second

// compile makes the registry serve the right generation of p (Registry.sync) and counts a
// generation that does not compile.
func (r *Reconciler) compile(ctx context.Context, p *v1alpha1.ClusterIPAMPolicy) (outcome, *v1alpha1.ClusterIPAMPolicy) {
	out, serving := r.Registry.sync(ctx, p)
	if len(out.errs) > 0 {
		metrics.Controller.CompileFailed()
	}
	return out, serving
}

// The last good generation is an annotation on the policy itself (merge patch).
// +kubebuilder:rbac:groups=ipam.virtualization.deckhouse.io,resources=clusteripampolicies,verbs=get;list;watch;patch

// persistLastGood makes p's AnnotationLastGood record serving (nil: leave it as it is, since
// nothing better is known). It is a metadata-only patch, which does not change the
// generation. A spec too large for an annotation is not stored, and an older stored
// generation is removed so that a restart never serves a generation older than the newest
// good one; out.notPersisted says so.
func (r *Reconciler) persistLastGood(ctx context.Context, p, serving *v1alpha1.ClusterIPAMPolicy, out *outcome) error {
	if serving == nil {
		return nil
	}
	want, err := encodeLastGood(serving)
	if err != nil {
		return err
	}
	if len(want) > maxLastGoodBytes {
		out.notPersisted, want = true, ""
	}
	if got, ok := p.Annotations[AnnotationLastGood]; (ok && got == want) || (!ok && want == "") {
		return nil
	}
	orig := p.DeepCopy()
	if want == "" {
		delete(p.Annotations, AnnotationLastGood)
	} else {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationLastGood] = want
	}
	if err := r.Client.Patch(ctx, p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording the last good generation of ClusterIPAMPolicy %s: %w", p.Name, err)
	}
	return nil
}

// +kubebuilder:rbac:groups=ipam.virtualization.deckhouse.io,resources=clusteripampolicies/status,verbs=patch

// writeStatus patches p's status when the outcome or the findings condition changes it.
func (r *Reconciler) writeStatus(ctx context.Context, p *v1alpha1.ClusterIPAMPolicy, out outcome, findings *metav1.Condition) error {
	status := newStatus(p, out)
	if findings != nil {
		meta.SetStatusCondition(&status.Conditions, *findings)
	}
	if equality.Semantic.DeepEqual(status, p.Status) {
		return nil
	}
	orig := p.DeepCopy()
	p.Status = status
	if err := r.Client.Status().Patch(ctx, p, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("writing the status of ClusterIPAMPolicy %s: %w", p.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler, which runs on the leader only, on generation
// changes and on changes of AnnotationLastGood (so that a removed or edited record is
// rewritten at once); status-only and other metadata updates do not trigger it. The Watcher
// keeps the registry of every replica current.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("clusteripampolicy").
		For(&v1alpha1.ClusterIPAMPolicy{}, builder.WithPredicates(compiledChanges))
	if r.Findings != nil {
		b = b.WatchesRawSource(source.Channel(r.Findings.Changes(), &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// compiledChanges passes the events that can change which generation of a policy serves.
var compiledChanges = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, lastGoodChanged)

// lastGoodChanged passes updates that change AnnotationLastGood.
var lastGoodChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldV, oldOK := e.ObjectOld.GetAnnotations()[AnnotationLastGood]
		newV, newOK := e.ObjectNew.GetAnnotations()[AnnotationLastGood]
		return oldV != newV || oldOK != newOK
	},
}
