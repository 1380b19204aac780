package policy

import (
	"fmt"
	"sync"
	"sync/atomic"

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

	mu       sync.Mutex
	compiled map[string]*evaluator.Policy
	current  atomic.Pointer[evaluator.Set]
	changes  chan event.GenericEvent
}

// NewRegistry compiles the built-in default policy and publishes a Set holding only it.
func NewRegistry(c *evaluator.Compiler) (*Registry, error) {
	b, err := policies.Builtin()
	if err != nil {
		return nil, err
	}
	builtin, errs := c.Compile(b, b)
	if len(errs) > 0 {
		return nil, fmt.Errorf("built-in policy %s does not compile: %w", b.Name, errs.ToAggregate())
	}
	r := &Registry{compiler: c, builtin: builtin, compiled: map[string]*evaluator.Policy{},
		changes: make(chan event.GenericEvent, 64)}
	r.current.Store(evaluator.NewSet(nil, builtin))
	return r, nil
}

// Set returns the current snapshot.
func (r *Registry) Set() *evaluator.Set { return r.current.Load() }

// Compiler returns the compiler the registry uses.
func (r *Registry) Compiler() *evaluator.Compiler { return r.compiler }

// Changes delivers one event per published change, carrying the policy that changed. Feed it
// to the VM reconciler; if nobody reads, changes are dropped once the buffer is full (the next
// resync re-evaluates everything anyway).
func (r *Registry) Changes() <-chan event.GenericEvent { return r.changes }

// Serving returns the compiled generation in force for the named policy, or nil.
func (r *Registry) Serving(name string) *evaluator.Policy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compiled[name]
}

// Put makes p the serving generation of its policy and publishes a new snapshot.
func (r *Registry) Put(obj *v1alpha1.ClusterIPAMPolicy, p *evaluator.Policy) {
	r.update(obj, func(m map[string]*evaluator.Policy) { m[p.Name] = p })
}

// Remove drops the named policy and publishes a new snapshot.
func (r *Registry) Remove(obj *v1alpha1.ClusterIPAMPolicy) {
	r.update(obj, func(m map[string]*evaluator.Policy) { delete(m, obj.Name) })
}

func (r *Registry) update(obj *v1alpha1.ClusterIPAMPolicy, change func(map[string]*evaluator.Policy)) {
	r.mu.Lock()
	change(r.compiled)
	list := make([]*evaluator.Policy, 0, len(r.compiled))
	for _, p := range r.compiled {
		list = append(list, p)
	}
	r.current.Store(evaluator.NewSet(list, r.builtin))
	r.mu.Unlock()
	select {
	case r.changes <- event.GenericEvent{Object: obj}:
	default:
	}
}
