package policy

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// sync decides which generation of p serves and makes the registry serve it: the current
// generation when it compiles (its expressions unchanged from the generation admitted before
// as stored, the others as new: admitted); else the one serving already for this incarnation of the
// policy; else the generation stored in AnnotationLastGood, compiled as stored; else none.
// It writes nothing and is idempotent, so that the Watcher (every replica) and the
// Reconciler (the leader) may both call it for the same object. It returns the outcome for
// the status and the object (spec and generation) that serves, or nil.
func (r *Registry) sync(ctx context.Context, p *v1alpha1.ClusterIPAMPolicy) (outcome, *v1alpha1.ClusterIPAMPolicy) {
	out := outcome{generation: p.Generation}
	compiled, errs := r.compiler.Compile(p, r.admitted(p))
	if len(errs) == 0 {
		if src := r.servingSource(p); src == nil || src.Generation != p.Generation {
			r.Put(p, compiled)
		}
		out.serving, out.warnings = p.Generation, compiled.Warnings()
		return out, p
	}
	out.errs = errs
	if src := r.servingSource(p); src != nil {
		out.serving = src.Generation
		return out, src
	}
	src, err := r.restore(p)
	if err != nil {
		out.restoreErr = err
		ctrl.LoggerFrom(ctx).V(1).Info("Last good generation not restored", "policy", klog.KObj(p), "reason", err.Error())
	}
	if src == nil {
		r.Remove(p.Name) // an earlier incarnation of the same name must not serve
		return out, nil
	}
	out.serving = src.Generation
	return out, src
}

// restore compiles the generation stored in p's AnnotationLastGood, as the previously stored
// object it is (StoredExpressions environment), and serves it. It returns nil without error
// when nothing is stored.
func (r *Registry) restore(p *v1alpha1.ClusterIPAMPolicy) (*v1alpha1.ClusterIPAMPolicy, error) {
	src, err := decodeLastGood(p)
	if err != nil || src == nil {
		return nil, err
	}
	compiled, errs := r.compiler.Compile(src, src)
	if len(errs) > 0 {
		return nil, fmt.Errorf("stored generation %d does not compile: %w", src.Generation, errs.ToAggregate())
	}
	r.Put(src, compiled)
	return src, nil
}

// admitted is the generation of p that compiled before — the one serving, or the one
// AnnotationLastGood records (p itself when that is p's generation) — which p's unchanged
// expressions are compiled as (stored); nil when none did, and every expression of p is
// checked as new. The webhook's failurePolicy is Ignore, so a generation written while it was
// unavailable reaches the controller unchecked, and compiled against itself it would skip
// every check of new expressions (literal guards, sorts of values of no known order, an
// estimate past the static limit).
func (r *Registry) admitted(p *v1alpha1.ClusterIPAMPolicy) *v1alpha1.ClusterIPAMPolicy {
	if src := r.servingSource(p); src != nil {
		return src
	}
	if recordsItself(p) {
		return p
	}
	if src, err := decodeLastGood(p); err == nil && src != nil {
		return src
	}
	return nil
}
