package policy

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// loader compiles every stored policy into the registry once, at start-up on every replica
// (with the caches synced), then closes Registry.Loaded. It writes nothing: the reconciler
// writes status and annotations. From then on the Watcher keeps the registry current, so a
// standby that takes over decides VMs with the policies as they are then, not as they were
// when it started.
type loader struct {
	client   client.Reader
	registry *Registry
}

var (
	_ manager.Runnable               = (*loader)(nil)
	_ manager.LeaderElectionRunnable = (*loader)(nil)
)

// loadRetry is the pause between attempts to list the policies.
const loadRetry = time.Second

// Start lists the policies (retrying until it can or ctx ends), compiles each and closes
// Registry.Loaded. It returns nil when ctx ends first.
func (l *loader) Start(ctx context.Context) error {
	var list v1alpha1.ClusterIPAMPolicyList
	_ = wait.PollUntilContextCancel(ctx, loadRetry, true, func(ctx context.Context) (bool, error) {
		if err := l.client.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Info("Listing ClusterIPAMPolicies for the start-up load failed; retrying", "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	stored := map[string]bool{}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil {
			l.registry.sync(ctx, p)
			stored[p.Name] = true
		}
	}
	l.preloadDefaults(ctx, stored)
	l.registry.markLoaded()
	return nil
}

// preloadDefaults compiles every shipped default policy that is not stored as the leader is
// about to store it (ApplyDefaults creates exactly the missing ones at start-up), so that on a
// fresh cluster no VM is first decided by the built-in layer and decided again, with another
// provenance in its record, once the default policy appears. The stored object replaces the
// preloaded one when the Watcher sees it.
func (l *loader) preloadDefaults(ctx context.Context, stored map[string]bool) {
	defaults, err := policies.Defaults()
	if err != nil {
		return // the compiled-in defaults are tested; ApplyDefaults reports the same error
	}
	for i := range defaults {
		if p := &defaults[i]; !stored[p.Name] {
			l.registry.sync(ctx, p)
		}
	}
}

// NeedLeaderElection is false: every replica loads (see Watcher).
func (l *loader) NeedLeaderElection() bool { return false }
