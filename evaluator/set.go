package evaluator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// BuiltinPolicy is Decision.Policy when the compiled-in default decided.
const BuiltinPolicy = "builtin:default"

// Set is an immutable snapshot of compiled policies in evaluation order (priority, then
// name), plus the built-in default that decides when none of them matches. It is safe for
// concurrent use; publish a new Set to change policies.
type Set struct {
	policies []*Policy
	builtin  *Policy
	limits   Limits
}

// NewSet orders policies by (priority, name), whatever order they come in. builtin decides
// when no policy matches; it must not be nil.
func NewSet(policies []*Policy, builtin *Policy) *Set {
	ordered := slices.Clone(policies)
	slices.SortFunc(ordered, func(a, b *Policy) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
	})
	return &Set{policies: ordered, builtin: builtin, limits: builtin.limits}
}

// Policies returns the names of the set's policies in evaluation order.
func (s *Set) Policies() []string {
	names := make([]string, len(s.policies))
	for i, p := range s.policies {
		names[i] = p.Name
	}
	return names
}

// Options tune one Decide call.
type Options struct {
	// Explain evaluates the match of every policy after the deciding one to fill
	// Trace.Shadowed (dry-run and CLI); the controller leaves it off.
	Explain bool
}

// Decide evaluates one interface (DESIGN.md §3.3): the first policy, in (priority, name)
// order, whose match and matchConditions hold decides; Audit policies only record what they
// would decide; an evaluation error skips the interface with ReasonPolicyError under
// failurePolicy Fail and passes the policy over under Ignore; when nothing decides, the
// built-in default does. An interface the decision attaches although it cannot have that
// address (another VM's, missing, on another network, not allocated, …) is skipped by guard
// whatever the policy says. Decide never returns an error and never panics on bad input; it is
// deterministic for a given input. A failed evaluation always has AllocationUnknown.
func (s *Set) Decide(ctx context.Context, in Input, opts Options) Decision {
	in.normalize()
	ctx, cancel := context.WithTimeout(ctx, s.limits.Deadline)
	defer cancel()
	r := &run{ctx: ctx, in: &in, budget: s.limits.InterfaceCostBudget}
	for i, p := range s.policies {
		if d, decided := r.consider(p); decided {
			return s.finish(r, guard(&in, d), i+1, opts)
		}
	}
	return s.finish(r, guard(&in, r.builtin(s.builtin)), len(s.policies), opts)
}

// consider evaluates policy p and says whether it decides the interface, recording in the
// trace what it did otherwise.
func (r *run) consider(p *Policy) (Decision, bool) {
	d, matched, err := r.policy(p)
	switch {
	case err != nil:
		r.trace.Errors = append(r.trace.Errors, err.Error())
		if p.Mode == v1alpha1.PolicyModeAudit {
			r.trace.Audit = append(r.trace.Audit, AuditRecord{Policy: p.Name, Error: err.Error()})
			return d, false
		}
		if p.FailurePolicy == v1alpha1.FailurePolicyIgnore {
			return d, false
		}
		r.trace.Matched = append(r.trace.Matched, p.Name)
		return failed(p, err, d.Trace.Variables), true
	case !matched:
		return d, false
	}
	r.trace.Matched = append(r.trace.Matched, p.Name)
	if p.Mode == v1alpha1.PolicyModeAudit {
		r.trace.Audit = append(r.trace.Audit, d.audit(p.Name))
		return d, false
	}
	return d, true
}

// builtin lets the built-in default decide. It is meant to match every interface; if it
// does not, that is an error too, so that no decision is ever made up.
func (r *run) builtin(b *Policy) Decision {
	d, matched, err := r.policy(b)
	if err == nil && !matched {
		err = &policyError{b.Name, "spec.match", errors.New("the built-in policy does not match the interface")}
	}
	if err != nil {
		r.trace.Errors = append(r.trace.Errors, err.Error())
		d = failed(b, err, d.Trace.Variables)
	}
	d.Policy = BuiltinPolicy
	return d
}

// finish completes d with its cost and trace. With Options.Explain it also evaluates the
// match of the Enforce policies from index next on, to list the ones d shadows; that work is
// not part of d's cost, and its errors are ignored.
func (s *Set) finish(r *run, d Decision, next int, opts Options) Decision {
	d.Cost = r.spent
	variables := d.Trace.Variables
	if opts.Explain {
		for _, p := range s.policies[min(next, len(s.policies)):] {
			if p.Mode != v1alpha1.PolicyModeEnforce {
				continue
			}
			if ok, err := r.matches(p); ok && err == nil {
				r.trace.Shadowed = append(r.trace.Shadowed, p.Name)
			}
		}
	}
	d.Trace = r.trace
	d.Trace.Variables = variables
	return d
}

func (d Decision) audit(policy string) AuditRecord {
	return AuditRecord{Policy: policy, Allocation: d.Allocation, Skip: d.Skip, Reason: d.Reason,
		Message: d.Message, Hotplug: d.Hotplug, Rule: d.Rule}
}

// failed is the Decision of a policy that failed under failurePolicy Fail: skipped, with the
// allocation unknown so that nothing existing is deleted. variables are the values the
// policy's variables had before it failed.
func failed(p *Policy, err error, variables map[string]string) Decision {
	return Decision{Allocation: AllocationUnknown, Skip: true, Reason: ReasonPolicyError,
		Message: err.Error(), Policy: p.Name, Trace: Trace{Variables: variables}}
}

// policyError is an evaluation error of one expression of one policy.
type policyError struct {
	policy, path string
	err          error
}

// Error renders "policy <name>: <field path>: <error>".
func (e *policyError) Error() string {
	return fmt.Sprintf("policy %s: %s: %v", e.policy, e.path, e.err)
}

// Unwrap returns the CEL error, so that errors.Is(err, context.DeadlineExceeded) works.
func (e *policyError) Unwrap() error { return e.err }

// matchesStatic checks the match block: selectors and networks, no CEL.
func (p *Policy) matchesStatic(in *Input) bool {
	if !p.namespaceSelector.Matches(labels.Set(in.Namespace.Labels)) ||
		!p.vmSelector.Matches(labels.Set(in.VM.Labels)) {
		return false
	}
	if len(p.networks) == 0 {
		return true
	}
	for _, n := range p.networks {
		if string(n.Type) == in.Interface.Type && (n.Name == "" || n.Name == in.Interface.Name) {
			return true
		}
	}
	return false
}

var errNotBool = errors.New("did not evaluate to a bool")
