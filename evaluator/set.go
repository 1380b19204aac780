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
// built-in default does. Decide never returns an error and never panics on bad input; it is
// deterministic for a given input.
func (s *Set) Decide(ctx context.Context, in Input, opts Options) Decision {
	in.normalize()
	ctx, cancel := context.WithTimeout(ctx, s.limits.Deadline)
	defer cancel()
	run := &run{ctx: ctx, in: &in, budget: s.limits.InterfaceCostBudget}
	var trace Trace
	for i, p := range s.policies {
		d, matched, err := run.policy(p)
		if err != nil {
			trace.Errors = append(trace.Errors, err.Error())
			if p.Mode == v1alpha1.PolicyModeAudit {
				trace.Audit = append(trace.Audit, AuditRecord{Policy: p.Name, Error: err.Error()})
				continue
			}
			if p.FailurePolicy == v1alpha1.FailurePolicyIgnore {
				continue
			}
			trace.Matched = append(trace.Matched, p.Name)
			return s.finish(run, errorDecision(p, err), trace, i, opts)
		}
		if !matched {
			continue
		}
		trace.Matched = append(trace.Matched, p.Name)
		if p.Mode == v1alpha1.PolicyModeAudit {
			trace.Audit = append(trace.Audit, d.audit(p.Name))
			continue
		}
		return s.finish(run, d, trace, i, opts)
	}
	d, _, err := run.policy(s.builtin)
	if err != nil {
		trace.Errors = append(trace.Errors, err.Error())
		d = errorDecision(s.builtin, err)
	}
	d.Policy = BuiltinPolicy
	return s.finish(run, d, trace, len(s.policies), opts)
}

func (s *Set) finish(r *run, d Decision, trace Trace, decidedAt int, opts Options) Decision {
	if opts.Explain {
		for _, p := range s.policies[min(decidedAt+1, len(s.policies)):] {
			if p.Mode == v1alpha1.PolicyModeEnforce {
				if ok, err := r.matches(p); ok && err == nil {
					trace.Shadowed = append(trace.Shadowed, p.Name)
				}
			}
		}
	}
	trace.Variables = d.Trace.Variables
	d.Trace = trace
	d.Cost = r.spent
	return d
}

func (d Decision) audit(policy string) AuditRecord {
	return AuditRecord{Policy: policy, Allocation: d.Allocation, Skip: d.Skip, Reason: d.Reason,
		Message: d.Message, Hotplug: d.Hotplug, Rule: d.Rule}
}

// errorDecision is the Decision of a policy that failed under failurePolicy Fail: skipped,
// with the allocation unknown so that nothing existing is deleted.
func errorDecision(p *Policy, err error) Decision {
	return Decision{Allocation: AllocationUnknown, Skip: true, Reason: ReasonPolicyError,
		Message: err.Error(), Policy: p.Name}
}

// policyError is an evaluation error of one expression of one policy.
type policyError struct {
	policy, path string
	err          error
}

func (e *policyError) Error() string {
	return fmt.Sprintf("policy %s: %s: %v", e.policy, e.path, e.err)
}
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
