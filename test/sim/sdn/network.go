package sdn

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// setupNetwork registers sdn-sim-network.
func (s *Simulator) setupNetwork(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-network").
		For(&sdnv1.Network{}).
		Complete(reconcile.Func(s.ReconcileNetwork))
}

// setupClusterNetwork registers sdn-sim-clusternetwork.
func (s *Simulator) setupClusterNetwork(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-clusternetwork").
		For(&sdnv1.ClusterNetwork{}).
		Complete(reconcile.Func(s.ReconcileClusterNetwork))
}

// ReconcileNetwork marks a Network Ready; see markReady.
func (s *Simulator) ReconcileNetwork(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := &sdnv1.Network{}
	if err := s.Client.Get(ctx, req.NamespacedName, n); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, s.markReady(ctx, n, &n.Status.Conditions)
}

// ReconcileClusterNetwork marks a ClusterNetwork Ready; see markReady.
func (s *Simulator) ReconcileClusterNetwork(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := &sdnv1.ClusterNetwork{}
	if err := s.Client.Get(ctx, req.NamespacedName, n); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, s.markReady(ctx, n, &n.Status.Conditions)
}

// markReady sets Ready=True on network obj, whose conditions are conds, unless it already has a
// Ready condition (of any status) or carries AnnotationHoldNotReady: "true".
func (s *Simulator) markReady(ctx context.Context, obj client.Object, conds *[]metav1.Condition) error {
	if obj.GetAnnotations()[AnnotationHoldNotReady] == "true" || meta.FindStatusCondition(*conds, sdnv1.ConditionReady) != nil {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: sdnv1.ReasonNetworkReady,
		Message: "ready (SDN stand-in)", ObservedGeneration: obj.GetGeneration(),
	})
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := s.Client.Status().Patch(ctx, obj, patch); err != nil {
		return fmt.Errorf("marking %s Ready: %w", klog.KObj(obj), err)
	}
	return nil
}
