package policy

import (
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// FindingsWindow is how long after a policy's last evaluation error its
// EvaluatesWithoutErrors condition stays False: a policy that fails on some inputs fails
// again whenever one of those VMs is reconciled, so the condition returns to True only once
// nothing has failed for this long.
const FindingsWindow = 10 * time.Minute

// findingsPublishInterval bounds the status writes of a failing policy: its condition is
// rewritten (with a new count and sample) at most once per interval, however many
// interfaces fail, so a policy failing on 10,000 VMs costs one write a minute, not 10,000.
const findingsPublishInterval = time.Minute

// Findings collects the evaluation errors the VM reconciles meet per policy — a
// failurePolicy Ignore policy passed over, an Audit policy that failed
// (evaluator.Trace.Failures), an enforced policy's PolicyError — for the Reconciler to show
// on the policy's status (condition EvaluatesWithoutErrors), as Kyverno's policy reports and
// ValidatingAdmissionPolicy's audit annotations let an admin find a policy that fails on some
// inputs. It is safe for concurrent use; the zero value is not: use NewFindings.
type Findings struct {
	mu       sync.Mutex
	byPolicy map[string]*finding
	changes  chan event.GenericEvent
}

// finding is one policy's errors since its condition was last True.
type finding struct {
	count       int64     // errors since first
	first, last time.Time // when the first and the last of them happened
	sample      string    // the last one: where, the field path and the error
	published   time.Time // when the condition last showed this finding
	announced   bool      // a change is announced and not yet shown
}

// NewFindings returns an empty collection.
func NewFindings() *Findings {
	return &Findings{byPolicy: map[string]*finding{}, changes: make(chan event.GenericEvent, 1024)}
}

// Changes delivers the policy whose finding is new and not yet shown (a GenericEvent
// carrying a ClusterIPAMPolicy of that name) to the Reconciler. Events are dropped when the
// channel is full: the Reconciler requeues every policy with a finding on its own.
func (f *Findings) Changes() <-chan event.GenericEvent { return f.changes }

// Observe records the errors of one decision of interface iface ("<Type>/<name>") of VM vm
// (namespace/name), made at now.
func (f *Findings) Observe(vm, iface string, d evaluator.Decision, now time.Time) {
	for _, fl := range d.Trace.Failures {
		f.add(fl.Policy, fmt.Sprintf("%s %s: %s (%s, failurePolicy %s): %s", vm, iface, fl.Field, fl.Mode, fl.FailurePolicy, fl.Error), now)
	}
	if d.Reason == evaluator.ReasonPolicyError && d.Policy != "" && d.Policy != evaluator.BuiltinPolicy {
		f.add(d.Policy, fmt.Sprintf("%s %s: %s", vm, iface, d.Message), now)
	}
}

func (f *Findings) add(policy, sample string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.byPolicy[policy]
	if fd == nil || now.Sub(fd.last) > FindingsWindow {
		fd = &finding{first: now}
		f.byPolicy[policy] = fd
	}
	fd.count++
	fd.last, fd.sample = now, truncate(sample, 1024)
	if fd.announced || !fd.published.IsZero() && now.Sub(fd.published) < findingsPublishInterval {
		return // shown within the minute: the Reconciler's requeue shows the rest
	}
	fd.announced = true
	select {
	case f.changes <- event.GenericEvent{Object: &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}}}:
	default:
	}
}

// condition is policy's EvaluatesWithoutErrors condition at now (nil when f is nil: nothing
// is collected, so nothing can be said), and how soon it should be looked at again (0: not
// before something changes). It marks the finding published.
func (f *Findings) condition(policy string, generation int64, now time.Time) (*metav1.Condition, time.Duration) {
	if f == nil {
		return nil, 0
	}
	c := &metav1.Condition{Type: v1alpha1.ConditionEvaluatesWithoutErrors, ObservedGeneration: generation,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNoEvaluationErrors,
		Message: fmt.Sprintf("No evaluation of this policy failed in the last %s", FindingsWindow)}
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.byPolicy[policy]
	if fd == nil {
		return c, 0
	}
	if now.Sub(fd.last) > FindingsWindow {
		delete(f.byPolicy, policy)
		return c, 0
	}
	fd.published, fd.announced = now, false
	c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonEvaluationFailed
	c.Message = fmt.Sprintf("%d evaluations failed since %s, the last at %s: %s", fd.count,
		fd.first.UTC().Format(time.RFC3339), fd.last.UTC().Format(time.RFC3339), fd.sample)
	return c, min(findingsPublishInterval, FindingsWindow-now.Sub(fd.last)+time.Second)
}

// Forget drops what is known of policy (deleted).
func (f *Findings) Forget(policy string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byPolicy, policy)
}
