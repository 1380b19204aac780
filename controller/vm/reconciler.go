package vm

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/firstseen"
	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
)

// PolicySource provides the current policy snapshot; policy.Registry implements it.
type PolicySource interface {
	Set() *evaluator.Set
}

// Reconciler reconciles VirtualMachines: it decides their interfaces, creates and releases
// their Auto IPAddresses and writes their decision records. Construct it with its exported
// fields set and call SetupWithManager.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads past the cache: an IPAddress after a Create's AlreadyExists, and the VM
	// and its launcher pods before a release's delete.
	APIReader client.Reader
	// Policies is the policy snapshot source.
	Policies PolicySource
	// Recorder emits events; nil disables them.
	Recorder events.EventRecorder
	// Findings, when set, is told every decision's policy errors, for the policies' status
	// (policy.Findings).
	Findings interface {
		Observe(vm, iface string, d evaluator.Decision, now time.Time)
	}
	// PolicyChanges, when set, delivers an event (carrying the changed ClusterIPAMPolicy)
	// whenever the policy snapshot changes; VMs are then re-evaluated.
	PolicyChanges <-chan event.GenericEvent
	// MaxConcurrentReconciles defaults to the manager's (--max-concurrent-reconciles), else
	// DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// Clock tells the time for the graces (FreshPendingGrace, ReleaseGrace); the real clock
	// when nil.
	Clock clock.PassiveClock
	// PoliciesLoaded, when set, is closed once every stored policy has been compiled into
	// Policies (policy.Registry.Loaded). Reconciles wait for it, so that after a restart no VM
	// is decided by the built-in default alone and then flipped back by the real policy.
	PoliciesLoaded <-chan struct{}
	// SDNLastAnswer, when set, tells when SDN was last seen answering an IPAddress on the
	// network of the one given (backlog.Tracker.LastAnswer): a new VM's unanswered Auto
	// IPAddress waits while SDN answers others (plan.Options.SDNLastAnswer). Nil: never
	// known, each waits UnansweredGrace.
	SDNLastAnswer func(*sdnv1.IPAddress) time.Time
	// SDNStalls, when set, delivers a notice whenever SDN falls quiet on a network with
	// IPAddresses unanswered (backlog.Tracker.Stalls); the VMs whose Auto IPAddresses wait —
	// on any network: the notice names none — are then reconciled again, to report those past
	// their grace.
	SDNStalls <-chan event.GenericEvent
	// SDNStalled, when set, tells whether the stall notice of the IPAddress's network is due
	// in its current quiet spell (backlog.Tracker.Stalled): vmipam's own unanswered creation is
	// then reconciled as the cache shows it (answeredFirst.Create), since the notice may have
	// been taken before and the creating reconcile may have planned to wait up to
	// plan.BacklogGrace.
	SDNStalled func(*sdnv1.IPAddress) bool

	backoffOnce sync.Once
	backoff     *retryBackoff
	// deadlineMissed records the VMs whose last reconcile held back a decision that ran out of time
	// (firstDeadlineMiss).
	deadlineMissOnce sync.Once
	deadlineMissMu   sync.Mutex
	deadlineMissed   map[reconcile.Request]bool
	ownOnce          sync.Once
	own              *writeExpectations
	// firstSeen remembers when the objects the API server dated after r's clock were first
	// seen (plan.Options.Created).
	firstSeenOnce sync.Once
	firstSeen     *firstseen.Clock
}

// DefaultMaxConcurrentReconciles is how many VMs are reconciled at once unless
// --max-concurrent-reconciles says otherwise. A reconcile spends nearly all its time waiting
// on the API server (its writes), so the workers bound how many hotplugs go through at once:
// docs/BENCHMARKS.md's hotplug timeline measures the queue wait behind them, and
// docs/SCALING.md how the figure was chosen.
const DefaultMaxConcurrentReconciles = 8

// Retry backoff for interfaces waiting on SDN (pool exhausted): exponential per VM, from
// exhaustionBaseDelay to exhaustionMaxDelay, reset once the VM no longer waits.
const (
	conflictRetry       = time.Second
	exhaustionBaseDelay = 2 * time.Second
	exhaustionMaxDelay  = 5 * time.Minute
)

// Reconcile runs observe → decide → act on IPAddresses → one record write for one VM. It
// returns an error (and the record stays as it was) when the API server fails; a VM that is
// gone or being deleted ends quietly — garbage collection removes its record and Auto
// IPAddresses. Every requeue it asks for (a grace's end, a release, a retry) is queued at
// priority 0 (ownRequeue).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (res reconcile.Result, err error) {
	defer func() { res = ownRequeue(res) }()
	if r.PoliciesLoaded != nil {
		select {
		case <-r.PoliciesLoaded:
		case <-ctx.Done():
			return reconcile.Result{}, ctx.Err()
		}
	}
	reader := expectingReader{Reader: r.Client, own: r.expectations()}
	vm := &vmv1.VirtualMachine{}
	if err := reader.Get(ctx, req.NamespacedName, vm); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetVM(req)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if vm.DeletionTimestamp != nil {
		r.forgetVM(req)
		return reconcile.Result{}, nil
	}
	start := time.Now()
	p, err := plan.Compute(ctx, reader, r.Policies.Set(), vm, plan.Options{Now: r.now(), SDNLastAnswer: r.SDNLastAnswer,
		Created: r.firstSeenClock().Created})
	if err != nil {
		return reconcile.Result{}, err
	}
	metrics.Controller.Evaluated(start)
	if late := p.Late(); r.firstDeadlineMiss(req, late) {
		retry := r.retries().next(req, r.now())
		ctrl.LoggerFrom(ctx).Info("policy evaluation ran out of wall-clock time; nothing written, retrying before a PolicyError is published",
			"interfaces", late, "retryAfter", retry)
		return reconcile.Result{RequeueAfter: retry}, nil
	}
	metrics.Current.SetVM(req.NamespacedName, interfaceStates(req.NamespacedName, p))
	for _, it := range p.Interfaces {
		if !it.Removed { // a removed interface is asked only hotplug: no decision to count
			metrics.Controller.Decided(it.Decision)
			if r.Findings != nil {
				r.Findings.Observe(req.String(), consumer.Label(it.Type, it.Name), it.Decision, r.now())
			}
		}
	}
	missed, err := r.execute(ctx, vm, p)
	if err != nil {
		if apierrors.IsConflict(err) {
			// Another writer got in first (a record edited or recreated by someone else, a
			// second replica); its watch event brings a fresh copy, and this retry covers a
			// lost event.
			ctrl.LoggerFrom(ctx).V(1).Info("conflict, retrying", "error", err.Error())
			return requeueIfMissed(missed, reconcile.Result{RequeueAfter: conflictRetry}), nil
		}
		return reconcile.Result{}, err
	}
	if p.Deferred {
		return requeueIfMissed(missed, reconcile.Result{RequeueAfter: p.RetryAfter}), nil
	}
	return requeueIfMissed(missed, untilRelease(p, r.retry(req, p))), nil
}

// ownRequeue gives res the priority of the VM's own timers: 0, the default of a change. Without
// it controller-runtime requeues the VM at the priority it was last taken out with — the
// initial list's low priority after a restart, AnsweredPriority after an answer — and a timer
// of a VM last woken at a low priority could wait behind a steady stream of new work.
func ownRequeue(res reconcile.Result) reconcile.Result {
	if res.Priority == nil {
		res.Priority = ptr.To(0)
	}
	return res
}

// forgetVM drops what the Reconciler keeps about req's VM: it is gone or being deleted.
func (r *Reconciler) forgetVM(req reconcile.Request) {
	metrics.Current.ForgetVM(req.NamespacedName)
	r.forgetDeadlineMiss(req)
}

// untilRelease brings the VM back when its next ReleaseGrace ends (p.ReleaseAfter: an
// unwanted IPAddress's deletion or a static IPAddress's handoff), unless res already brings
// it back sooner.
func untilRelease(p *plan.Plan, res reconcile.Result) reconcile.Result {
	if p.ReleaseAfter > 0 && (res.RequeueAfter == 0 || res.RequeueAfter > p.ReleaseAfter) {
		res.RequeueAfter = p.ReleaseAfter
	}
	return res
}

// missedEventRequeue is how soon a VM is reconciled again when an event that arrived during one of
// its reconcile's writes changed what vmipam reads (writeExpectations.shouldEnqueue): at once, as the event would have
// enqueued it.
const missedEventRequeue = time.Millisecond

// requeueIfMissed brings the VM back at once when missed, else returns res.
func requeueIfMissed(missed bool, res reconcile.Result) reconcile.Result {
	if missed && (res.RequeueAfter == 0 || res.RequeueAfter > missedEventRequeue) {
		res.RequeueAfter = missedEventRequeue
	}
	return res
}

// firstDeadlineMiss reports whether this reconcile of req, whose decisions of the interfaces late ran
// out of wall-clock time (outOfTime), should hold them back: yes when late is not empty and the
// VM's previous reconcile had no such failure. A decision that fails only because its time ran
// out says more about how busy the process was (a starved controller, a GC pause, a load
// spike) than about the policy, and the same input usually decides on the next try. So the
// first such failure is not published: the reconcile writes nothing — no IPAddress, no
// record, no event; what the VM shows stays what it was, as after a transient API error — and
// the VM is retried with backoff. When the retry runs out of time again the PolicyError is
// published (the policy may really be too slow, and the record must say so), and retry keeps
// retrying it with backoff. A reconcile without such a failure resets it.
func (r *Reconciler) firstDeadlineMiss(req reconcile.Request, late []string) bool {
	r.deadlineMissOnce.Do(func() { r.deadlineMissed = map[reconcile.Request]bool{} })
	r.deadlineMissMu.Lock()
	defer r.deadlineMissMu.Unlock()
	if len(late) == 0 {
		delete(r.deadlineMissed, req)
		return false
	}
	if r.deadlineMissed[req] {
		return false // late twice in a row: publish
	}
	r.deadlineMissed[req] = true
	return true
}

// forgetDeadlineMiss drops req's record of a late decision (the VM is gone).
func (r *Reconciler) forgetDeadlineMiss(req reconcile.Request) { r.firstDeadlineMiss(req, nil) }

// retry schedules a re-reconcile with backoff while an interface waits for a pool to free up,
// on top of the IPAddress watch, because SDN may not write an event when space frees; when the
// VM's evaluation budget ran out before every interface was decided; and when a decision
// failed for want of time, which a less busy moment may decide (plan.Plan.Retry).
func (r *Reconciler) retry(req reconcile.Request, p *plan.Plan) reconcile.Result {
	b := r.retries()
	if p.Retry() {
		return reconcile.Result{RequeueAfter: b.next(req, r.now())}
	}
	b.forget(req)
	return reconcile.Result{}
}

// retries is the reconciler's backoff, made on first use (also without SetupWithManager).
func (r *Reconciler) retries() *retryBackoff {
	r.backoffOnce.Do(func() {
		r.backoff = &retryBackoff{due: map[reconcile.Request]time.Time{},
			limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](exhaustionBaseDelay, exhaustionMaxDelay)}
	})
	return r.backoff
}

// expectations are the reconciler's writeExpectations, made on first use (also without
// SetupWithManager).
func (r *Reconciler) expectations() *writeExpectations {
	r.ownOnce.Do(func() { r.own = newOwnWrites(r.now) })
	return r.own
}

// firstSeenClock is r's firstseen.Clock, made on first use.
func (r *Reconciler) firstSeenClock() *firstseen.Clock {
	r.firstSeenOnce.Do(func() { r.firstSeen = firstseen.New(0) })
	return r.firstSeen
}

// retryBackoff spaces the retries of VMs waiting for a pool exponentially. Only a retry that
// is due makes the next delay grow: a reconcile that an event brings earlier (another VM's
// IPAddress changed) keeps the schedule, so a busy namespace does not push a waiting VM's
// retry out to the maximum.
type retryBackoff struct {
	mu      sync.Mutex
	limiter workqueue.TypedRateLimiter[reconcile.Request]
	due     map[reconcile.Request]time.Time // when the scheduled retry of a VM is
}

// next returns how long until req's retry at now: what is left of the scheduled one, or, when
// none is scheduled or it is due, the next exponential step.
func (b *retryBackoff) next(req reconcile.Request, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if due, ok := b.due[req]; ok && now.Before(due) {
		return due.Sub(now)
	}
	d := b.limiter.When(req)
	b.due[req] = now.Add(d)
	return d
}

// forget resets req's backoff: it no longer waits.
func (b *retryBackoff) forget(req reconcile.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.due, req)
	b.limiter.Forget(req)
}

// maxEventNote is the longest note the API server accepts on an event (events.k8s.io/v1
// validation: 1 KiB); a longer one is rejected and the event lost.
const maxEventNote = 1024

// event records an event about obj, its note cut to maxEventNote. related, when not nil, is
// part of the events API's aggregation key, so events about different IPAddresses never
// collapse into one series.
func (r *Reconciler) event(obj, related runtime.Object, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(eventReference(obj), eventReference(related), eventType, reason, action, "%s",
			consumer.Truncate(evaluator.SafeMessage(fmt.Sprintf(note, args...)), maxEventNote))
	}
}

// SetupWithManager registers the reconciler and its watches (DESIGN.md §4.5).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = cmp.Or(mgr.GetControllerOptions().MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	}
	return r.watches(ctrl.NewControllerManagedBy(mgr)).Complete(r)
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}
