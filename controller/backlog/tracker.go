package backlog

import (
	"context"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// DefaultCheckInterval is how often Start looks whether SDN has fallen quiet on a network: the
// stall notice comes at most this long after the quiet time has passed.
const DefaultCheckInterval = time.Second

// Tracker follows SDN's answers on the IPAddresses of one cache, per network (an IPAddress's
// spec.networkRef): SDN allocates from each network's pool, and a network whose IPAM is broken
// must not look busy because another network's addresses are being answered. Create it with
// New and register it with Watch; its methods are safe for concurrent use.
type Tracker struct {
	clock clock.WithTicker
	// quiet is how long SDN may go without answering on a network, while IPAddresses of it
	// wait, before a stall notice is sent.
	quiet  time.Duration
	stalls chan event.GenericEvent

	mu sync.Mutex
	// synced reports whether the informer has delivered the cache's initial list (nil: not
	// watching yet). Until it has, nothing is known about SDN: the list's objects arrive as
	// additions, and answers only as updates.
	synced func() bool
	// since is when the Tracker first found the informer synced: no evidence of a stall
	// before it (zero until then).
	since time.Time
	nets  map[network]*netState
}

// network is an IPAddress's spec.networkRef: kind, namespace (a Network's; empty for a
// ClusterNetwork) and name.
type network struct{ kind, namespace, name string }

// netState is what the Tracker knows of SDN's answers on one network.
type netState struct {
	// last is when SDN was last seen answering an IPAddress of the network (zero: never).
	last time.Time
	// unanswered counts the cached IPAddresses of the network whose status is empty.
	unanswered int
	// waiting is when unanswered last rose from 0: a quiet spell counts from then at the
	// earliest, so that the first address on a network idle for hours is not a stall.
	waiting time.Time
	// noticed: a stall notice was sent for the current quiet spell.
	noticed bool
}

// networkOf is ip's network. A Network is namespaced (the IPAddress's namespace); a
// ClusterNetwork is not.
func networkOf(ip *sdnv1.IPAddress) network {
	ref := ip.Spec.NetworkRef
	n := network{kind: ref.Kind, name: ref.Name}
	if ref.Kind != sdnv1.KindClusterNetwork {
		n.namespace = ip.Namespace
	}
	return n
}

// New returns a Tracker that sends a stall notice once SDN has been quiet for quiet (the VM
// reconciler's plan.UnansweredGrace) on a network with IPAddresses unanswered. clk is the
// real clock when nil.
func New(quiet time.Duration, clk clock.WithTicker) *Tracker {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Tracker{clock: clk, quiet: quiet, stalls: make(chan event.GenericEvent, 1), nets: map[network]*netState{}}
}

// Watch registers the Tracker's handler on c's IPAddress informer. Errors are the cache's
// (the kind is not in its scheme, or the cache is stopping).
func (t *Tracker) Watch(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &sdnv1.IPAddress{})
	if err != nil {
		return fmt.Errorf("getting the IPAddress informer: %w", err)
	}
	reg, err := inf.AddEventHandler(t.handler())
	if err != nil {
		return fmt.Errorf("watching IPAddresses for SDN's answers: %w", err)
	}
	t.mu.Lock()
	t.synced = reg.HasSynced
	t.mu.Unlock()
	return nil
}

// LastAnswer is when SDN was last seen answering an IPAddress on ip's network, but not
// before the Tracker's informer synced (plan.Options.SDNLastAnswer): a process that has just
// started has no evidence of a stall. Before the informer has synced it is now.
func (t *Tracker) LastAnswer(ip *sdnv1.IPAddress) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncedLocked() {
		return t.clock.Now()
	}
	last := t.since
	if n := t.nets[networkOf(ip)]; n != nil && n.last.After(last) {
		last = n.last
	}
	return last
}

// Stalled reports whether the stall notice of ip's network's current quiet spell is due: SDN
// has been quiet there for the quiet time while IPAddresses waited, has not answered one
// since, and some still wait (the notice is sent, or waiting to be taken, or was dropped for
// one already waiting, taken later). The notice's receiver looks at the IPAddresses its cache
// shows when it takes the notice; one the cache shows only later — vmipam's own creation,
// planned while SDN still counted as answering there and written as the spell began — is not
// among them, and whoever sees it appear asks this (the VM reconciler's IPAddress watch).
// It stays true for the rest of the spell, so every own creation on a network SDN does not
// answer costs its VM one reconcile more (as every creation did before round 15).
func (t *Tracker) Stalled(ip *sdnv1.IPAddress) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nets[networkOf(ip)]
	return n != nil && n.noticed
}

// syncedLocked reports whether the informer has synced, noting when it was first found so.
func (t *Tracker) syncedLocked() bool {
	if !t.since.IsZero() {
		return true
	}
	if t.synced == nil || !t.synced() {
		return false
	}
	t.since = t.clock.Now()
	return true
}

// Stalls delivers a notice (its Object an empty IPAddress, naming none) each time SDN falls
// quiet for the Tracker's quiet time on a network whose IPAddresses wait for its answer — the
// quiet counted from the latest of SDN's last answer there, the informer's sync and the
// moment the network's first unanswered IPAddress appeared: once per quiet spell. A notice
// the receiver has not taken yet is not repeated. The notice does not name the network: its
// receiver looks at every VM with an unanswered IPAddress (those not yet past their grace
// stay deferred, writing nothing).
func (t *Tracker) Stalls() <-chan event.GenericEvent { return t.stalls }

// handler counts the unanswered IPAddresses and notes every first answer.
func (t *Tracker) handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ip, ok := obj.(*sdnv1.IPAddress); ok && !ip.Status.Answered() {
				t.count(networkOf(ip), 1, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*sdnv1.IPAddress)
			n, ok2 := newObj.(*sdnv1.IPAddress)
			if !ok1 || !ok2 {
				return
			}
			if networkOf(o) != networkOf(n) { // its networkRef was edited: it moved
				if !o.Status.Answered() {
					t.count(networkOf(o), -1, false)
				}
				if !n.Status.Answered() {
					t.count(networkOf(n), 1, false)
				}
				return
			}
			switch was, is := o.Status.Answered(), n.Status.Answered(); {
			case !was && is:
				t.count(networkOf(n), -1, true)
			case was && !is: // its status was removed: waiting again
				t.count(networkOf(n), 1, false)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ip, ok := obj.(*sdnv1.IPAddress); ok && !ip.Status.Answered() {
				t.count(networkOf(ip), -1, false)
			}
		},
	}
}

// count changes the number of unanswered IPAddresses of net by delta; answered notes an
// answer on net now.
func (t *Tracker) count(net network, delta int, answered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nets[net]
	if n == nil {
		n = &netState{}
		t.nets[net] = n
	}
	if n.unanswered == 0 && delta > 0 {
		n.waiting = t.clock.Now()
	}
	n.unanswered = max(n.unanswered+delta, 0)
	if answered || n.unanswered == 0 { // an answer, or nothing left waiting, ends the quiet spell
		n.noticed = false
	}
	if answered {
		n.last = t.clock.Now()
	}
	if n.unanswered == 0 && n.last.IsZero() {
		delete(t.nets, net) // nothing to remember
	}
}

// Start checks every DefaultCheckInterval, until ctx ends, whether the informer has synced
// (noting when) and whether SDN has fallen quiet on a network, and sends the stall notice when
// it has (manager.Runnable). It runs on every replica (NeedLeaderElection), so that each
// dates its knowledge from its own sync and the dry run of a standby judges as the leader
// does; only the leader's VM reconciler takes the notices, a standby's are dropped.
func (t *Tracker) Start(ctx context.Context) error {
	tick := t.clock.NewTicker(DefaultCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			t.check()
		}
	}
}

// NeedLeaderElection reports false: every replica runs Start (manager.LeaderElectionRunnable).
func (t *Tracker) NeedLeaderElection() bool { return false }

// check sends the stall notice when SDN has been quiet for the quiet time on a network with
// IPAddresses unanswered, once per quiet spell.
func (t *Tracker) check() {
	if !t.stalled() {
		return
	}
	select {
	case t.stalls <- event.GenericEvent{Object: &sdnv1.IPAddress{}}:
	default: // one is waiting to be taken: it brings the same VMs back
	}
}

// stalled reports whether a network has fallen quiet since its last notice, and marks every
// such network noticed.
func (t *Tracker) stalled() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.syncedLocked() {
		return false
	}
	now, any := t.clock.Now(), false
	for _, n := range t.nets {
		last := n.last
		for _, t := range []time.Time{t.since, n.waiting} {
			if last.Before(t) {
				last = t
			}
		}
		if !n.noticed && n.unanswered > 0 && now.Sub(last) >= t.quiet {
			n.noticed, any = true, true
		}
	}
	return any
}
