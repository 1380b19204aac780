package policy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Watcher keeps the Registry of every replica — leader or standby — current with the stored
// policies, so that a standby's dry-run API decides with the installed policies and a standby
// that takes over starts with them compiled. It only reads: the leader's Reconciler writes
// status and AnnotationLastGood. Its start-up load closes Registry.Loaded.
type Watcher struct {
	// Client reads policies (the manager's cache).
	Client   client.Reader
	Registry *Registry
}

// Reconcile makes the registry serve the right generation of the policy (Registry.sync), or
// nothing once it is gone. Errors are cache errors and are retried.
func (w *Watcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p := &v1alpha1.ClusterIPAMPolicy{}
	if err := w.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			w.Registry.Remove(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("getting ClusterIPAMPolicy %s: %w", req.Name, err)
	}
	if p.DeletionTimestamp != nil {
		w.Registry.Remove(p.Name)
		return reconcile.Result{}, nil
	}
	w.Registry.sync(ctx, p)
	return reconcile.Result{}, nil
}

// SetupWithManager registers the start-up load and the watch, both on every replica
// (NeedLeaderElection false), triggered by the same changes as the Reconciler.
func (w *Watcher) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(&loader{client: w.Client, registry: w.Registry}); err != nil {
		return fmt.Errorf("adding the policy start-up load: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).Named("clusteripampolicy-registry").
		For(&v1alpha1.ClusterIPAMPolicy{}, builder.WithPredicates(compiledChanges)).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(w)
}
