package vm

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// WatchRecordObservation feeds metrics.Records from the cache's record informer: every
// record's generation against the generation its consumer observed. It runs on every replica
// (the cache does), so a standby reports the same figure as the leader.
func WatchRecordObservation(ctx context.Context, informers cache.Informers) error {
	informer, err := informers.GetInformer(ctx, &v1alpha1.VirtualMachineIPAM{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("record informer: %w", err)
	}
	observe := func(obj any) {
		if rec, ok := obj.(*v1alpha1.VirtualMachineIPAM); ok {
			metrics.Records.Observe(types.NamespacedName{Namespace: rec.Namespace, Name: rec.Name}, rec.Generation, rec.Status.ObservedGeneration)
		}
	}
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if rec, ok := obj.(*v1alpha1.VirtualMachineIPAM); ok {
				metrics.Records.Forget(types.NamespacedName{Namespace: rec.Namespace, Name: rec.Name})
			}
		},
	})
	return err
}
