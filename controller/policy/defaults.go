package policy

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/policies"
)

// +kubebuilder:rbac:groups=ipam.virtualization.deckhouse.io,resources=clusteripampolicies,verbs=create

// ApplyDefaults creates each shipped default policy that does not exist. An existing policy of
// the same name is left exactly as it is, so an admin's edit is never overwritten; deleting a
// default policy brings it back at the next start (the built-in default decides meanwhile).
func ApplyDefaults(ctx context.Context, c client.Client) error {
	defaults, err := policies.Defaults()
	if err != nil {
		return fmt.Errorf("loading the shipped default policies: %w", err)
	}
	for i := range defaults {
		p := &defaults[i]
		if err := c.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create default ClusterIPAMPolicy %s: %w", p.Name, err)
		}
	}
	return nil
}

// DefaultsRunnable applies the defaults once the manager has started and this replica leads
// (so one replica creates them). An error stops the manager: the controller does not run
// with a half-installed default set it would silently keep.
func DefaultsRunnable(c client.Client) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error { return ApplyDefaults(ctx, c) })
}
