package policy

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Registry holds the last good compiled generation of every policy and publishes them as one
// immutable evaluator.Set. Set is lock-free; updates are serialised.
type Registry struct {
	compiler *evaluator.Compiler
	builtin  *evaluator.Policy

	mu      sync.Mutex
	serving map[string]entry
	current atomic.Pointer[evaluator.Set]
	changes chan event.GenericEvent

	// pending holds the changes not yet delivered on changes, at most one per policy name (the
	// newest), in the order they were first announced; wake tells the pump there are some.
	pendingMu sync.Mutex
	pending   []*v1alpha1.ClusterIPAMPolicy
	wake      chan struct{}

	loaded     chan struct{}
	loadedOnce sync.Once
}

// entry is the serving generation of one policy: the object it was compiled from (its UID,
// generation and spec — for a restored generation, the stored spec) and the compiled form.
type entry struct {
	source   *v1alpha1.ClusterIPAMPolicy
	compiled *evaluator.Policy
}

// NewRegistry compiles the built-in default policy and publishes a Set holding only it.
func NewRegistry(c *evaluator.Compiler) (*Registry, error) {
	b, err := policies.Builtin()
	if err != nil {
		return nil, fmt.Errorf("loading the built-in policy: %w", err)
	}
	builtin, errs := c.Compile(b, b)
	if len(errs) > 0 {
		return nil, fmt.Errorf("built-in policy %s does not compile: %w", b.Name, errs.ToAggregate())
	}
	r := &Registry{compiler: c, builtin: builtin, serving: map[string]entry{},
		changes: make(chan event.GenericEvent), wake: make(chan struct{}, 1), loaded: make(chan struct{})}
	r.current.Store(evaluator.NewSet(nil, builtin))
	go r.pump()
	return r, nil
}

// Set returns the current snapshot.
func (r *Registry) Set() *evaluator.Set { return r.current.Load() }

// Compiler returns the compiler the registry uses.
func (r *Registry) Compiler() *evaluator.Compiler { return r.compiler }

// Changes delivers the published changes, each carrying the policy that changed: the object
// that now serves (for a restored generation, with the stored spec and generation), or a
// name-only object when the policy stopped serving. No change is ever dropped: while nobody
// reads, changes of the same policy coalesce into its newest (what the VM reconciler needs to
// know is which policies changed, and what serves now), so what waits is bounded by the
// number of policies. Feed it to the VM reconciler.
func (r *Registry) Changes() <-chan event.GenericEvent { return r.changes }

// Loaded is closed once every policy stored at start-up has been compiled into the registry
// (by the Reconciler's start-up load). Until then Set holds only some policies or none, so
// the VM reconciler must not decide before it is closed: right after a restart the built-in
// default would otherwise briefly decide for interfaces an installed policy governs.
func (r *Registry) Loaded() <-chan struct{} { return r.loaded }

func (r *Registry) markLoaded() { r.loadedOnce.Do(func() { close(r.loaded) }) }

// Serving returns the compiled generation in force for the named policy, or nil.
func (r *Registry) Serving(name string) *evaluator.Policy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.serving[name].compiled
}

// Put makes p, compiled from obj, the serving generation of obj's policy and publishes a new
// snapshot. obj is copied; its UID, generation and spec are remembered as p's source.
func (r *Registry) Put(obj *v1alpha1.ClusterIPAMPolicy, p *evaluator.Policy) {
	src := obj.DeepCopy()
	r.update(obj, func(m map[string]entry) bool {
		m[obj.Name] = entry{source: src, compiled: p}
		return true
	})
}

// Remove drops the named policy and publishes a new snapshot, announcing a name-only
// ClusterIPAMPolicy on Changes; it does nothing (and publishes nothing) when the policy does
// not serve.
func (r *Registry) Remove(name string) {
	gone := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	r.update(gone, func(m map[string]entry) bool {
		if _, ok := m[name]; !ok {
			return false
		}
		delete(m, name)
		return true
	})
}

// servingSource returns the object the serving generation of obj's policy was compiled from,
// or nil when nothing serves for this incarnation of the policy (same name, same UID): a
// policy deleted and re-created under the same name never inherits the old one's generation.
func (r *Registry) servingSource(obj *v1alpha1.ClusterIPAMPolicy) *v1alpha1.ClusterIPAMPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.serving[obj.Name]
	if !ok || e.source.UID != obj.UID {
		return nil
	}
	return e.source
}

// update applies change under the lock and, when it reports a change, publishes a new
// snapshot and announces obj on Changes.
func (r *Registry) update(obj *v1alpha1.ClusterIPAMPolicy, change func(map[string]entry) bool) {
	r.mu.Lock()
	if !change(r.serving) {
		r.mu.Unlock()
		return
	}
	list := make([]*evaluator.Policy, 0, len(r.serving))
	for _, e := range r.serving {
		list = append(list, e.compiled)
	}
	r.current.Store(evaluator.NewSet(list, r.builtin))
	r.mu.Unlock()
	r.announce(obj)
}

// announce queues obj for Changes, replacing a change of the same policy not yet delivered.
func (r *Registry) announce(obj *v1alpha1.ClusterIPAMPolicy) {
	r.pendingMu.Lock()
	i := slices.IndexFunc(r.pending, func(p *v1alpha1.ClusterIPAMPolicy) bool { return p.Name == obj.Name })
	if i >= 0 {
		r.pending[i] = obj
	} else {
		r.pending = append(r.pending, obj)
	}
	r.pendingMu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default: // the pump is awake already and will see it
	}
}

// pump delivers pending changes on Changes, blocking while nobody reads. It runs for the
// registry's lifetime.
func (r *Registry) pump() {
	for range r.wake {
		for {
			r.pendingMu.Lock()
			if len(r.pending) == 0 {
				r.pendingMu.Unlock()
				break
			}
			next := r.pending[0]
			r.pending = r.pending[1:]
			r.pendingMu.Unlock()
			r.changes <- event.GenericEvent{Object: next}
		}
	}
}
