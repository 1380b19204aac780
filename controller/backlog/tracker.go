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

// DefaultCheckInterval is how often Run looks whether SDN has fallen quiet: the stall notice
// comes at most this long after Quiet has passed.
const DefaultCheckInterval = time.Second

// Tracker follows SDN's answers on the IPAddresses of one cache. Create it with New and
// register it with Watch; its methods are safe for concurrent use.
type Tracker struct {
	clock clock.WithTicker
	// quiet is how long SDN may go without answering, while IPAddresses wait, before a stall
	// notice is sent.
	quiet  time.Duration
	stalls chan event.GenericEvent

	mu sync.Mutex
	// last is when SDN was last seen answering; the Tracker's creation until it first is (no
	// evidence of a stall before this process started watching).
	last time.Time
	// unanswered counts the cached IPAddresses whose status is empty.
	unanswered int
	// noticed: a stall notice was sent since last.
	noticed bool
}

// New returns a Tracker that sends a stall notice once SDN has been quiet for quiet (the VM
// reconciler's plan.UnansweredGrace) with IPAddresses unanswered. clk is the real clock when
// nil.
func New(quiet time.Duration, clk clock.WithTicker) *Tracker {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Tracker{clock: clk, quiet: quiet, stalls: make(chan event.GenericEvent, 1), last: clk.Now()}
}

// Watch registers the Tracker's handler on c's IPAddress informer. Errors are the cache's
// (the kind is not in its scheme, or the cache is stopping).
func (t *Tracker) Watch(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &sdnv1.IPAddress{})
	if err != nil {
		return fmt.Errorf("getting the IPAddress informer: %w", err)
	}
	if _, err := inf.AddEventHandler(t.handler()); err != nil {
		return fmt.Errorf("watching IPAddresses for SDN's answers: %w", err)
	}
	return nil
}

// LastAnswer is when SDN was last seen answering an IPAddress (plan.Options.SDNLastAnswer).
func (t *Tracker) LastAnswer() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// Stalls delivers a notice (its Object an empty IPAddress, naming none) each time SDN falls quiet for the
// Tracker's quiet time while IPAddresses wait for its answer: once per quiet spell. A notice
// the receiver has not taken yet is not repeated.
func (t *Tracker) Stalls() <-chan event.GenericEvent { return t.stalls }

// handler counts the unanswered IPAddresses and notes every first answer.
func (t *Tracker) handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ip, ok := obj.(*sdnv1.IPAddress); ok && !ip.Status.Answered() {
				t.count(1, false)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*sdnv1.IPAddress)
			n, ok2 := newObj.(*sdnv1.IPAddress)
			if !ok1 || !ok2 {
				return
			}
			switch was, is := o.Status.Answered(), n.Status.Answered(); {
			case !was && is:
				t.count(-1, true)
			case was && !is: // its status was removed: waiting again
				t.count(1, false)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if ip, ok := obj.(*sdnv1.IPAddress); ok && !ip.Status.Answered() {
				t.count(-1, false)
			}
		},
	}
}

// count changes the number of unanswered IPAddresses by delta; answered notes an answer now.
func (t *Tracker) count(delta int, answered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unanswered = max(t.unanswered+delta, 0)
	if answered {
		t.last, t.noticed = t.clock.Now(), false
	}
}

// Start checks every DefaultCheckInterval, until ctx ends, whether SDN has fallen quiet, and
// sends the stall notice when it has (manager.Runnable; it runs on every replica, and only the
// leader's VM reconciler listens).
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

// check sends the stall notice when SDN has been quiet for the quiet time with IPAddresses
// unanswered, once per quiet spell.
func (t *Tracker) check() {
	t.mu.Lock()
	stalled := !t.noticed && t.unanswered > 0 && t.clock.Since(t.last) >= t.quiet
	if stalled {
		t.noticed = true
	}
	t.mu.Unlock()
	if !stalled {
		return
	}
	select {
	case t.stalls <- event.GenericEvent{Object: &sdnv1.IPAddress{}}:
	default: // one is waiting to be taken: it brings the same VMs back
	}
}
