package policy

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// loader compiles every stored policy into the registry once, when this replica starts
// leading (alongside the controllers, with the caches synced), then closes Registry.Loaded.
// It writes nothing: the reconciler writes status and annotations. Loading at leadership
// rather than at process start means a standby that takes over decides VMs with the policies
// as they are then, not as they were when it started.
type loader struct{ r *Reconciler }

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
		if err := l.r.Client.List(ctx, &list); err != nil {
			ctrl.LoggerFrom(ctx).Info("Listing ClusterIPAMPolicies for the start-up load failed; retrying", "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil {
			l.r.compile(ctx, p)
		}
	}
	l.r.Registry.markLoaded()
	return nil
}

// NeedLeaderElection is true: see loader.
func (l *loader) NeedLeaderElection() bool { return true }
