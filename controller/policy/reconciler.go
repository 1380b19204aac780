package policy

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Reconciler compiles ClusterIPAMPolicies into the Registry and writes their status.
type Reconciler struct {
	Client   client.Client
	Registry *Registry
}

// Reconcile compiles the policy's current generation. On success it serves; on failure the
// last good generation keeps serving (if any) and status says so with every error's path.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.ClusterIPAMPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if client.IgnoreNotFound(err) == nil {
			p.Name = req.Name
			r.Registry.Remove(p)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if p.DeletionTimestamp != nil {
		r.Registry.Remove(p)
		return reconcile.Result{}, nil
	}
	compiled, errs := r.Registry.Compiler().Compile(p, p)
	status := p.Status.DeepCopy()
	status.ObservedGeneration = p.Generation
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: p.Generation}
	if len(errs) == 0 {
		if serving := r.Registry.Serving(p.Name); serving == nil || serving.Generation != p.Generation {
			r.Registry.Put(p, compiled)
		}
		status.ServingGeneration = p.Generation
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonCompiled
		cond.Message = fmt.Sprintf("Generation %d compiled and serves", p.Generation)
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonCompilationFailed
		cond.Message = failureMessage(errs.ToAggregate().Errors(), r.Registry.Serving(p.Name))
		if r.Registry.Serving(p.Name) == nil {
			status.ServingGeneration = 0
		}
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if equality.Semantic.DeepEqual(*status, p.Status) {
		return reconcile.Result{}, nil
	}
	orig := p.DeepCopy()
	p.Status = *status
	return reconcile.Result{}, r.Client.Status().Patch(ctx, p, client.MergeFrom(orig))
}

func failureMessage(errs []error, serving *evaluator.Policy) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	out := strings.Join(msgs, "; ")
	if serving != nil {
		return out + fmt.Sprintf("; generation %d keeps serving", serving.Generation)
	}
	return out + "; the policy is not used until it compiles"
}

// SetupWithManager registers the reconciler; status-only updates do not trigger it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("clusteripampolicy").
		For(&v1alpha1.ClusterIPAMPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
