package evaluator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// BuiltinPolicy is the built-in default's name in a Decision's provenance.
const BuiltinPolicy = "builtin:default"

// Set is an immutable snapshot of compiled policies in evaluation order (priority, then
// name), followed by the built-in default, which is always there, and the safety policy. It is
// safe for concurrent use; publish a new Set to change policies.
type Set struct {
	// layers are the installed policies in order, then the built-in default.
	layers []*Policy
	safety *Policy
	limits Limits
	// bounded are, by policy name (the safety policy's included), the input fields whose
	// bounds Decide enforces before it evaluates the policy: those its expressions read.
	bounded map[string][]cost.Field
	// messageBounded are, by policy name, the bounded input fields only its
	// messageExpressions read: beyond them, those messages fall back to the static ones.
	messageBounded map[string][]cost.Field
}

// NewSet orders policies by (priority, name), whatever order they come in, and puts builtin
// after them; builtin must not be nil. The safety policy is the one of builtin's Compiler.
func NewSet(policies []*Policy, builtin *Policy) *Set {
	ordered := slices.Clone(policies)
	slices.SortFunc(ordered, func(a, b *Policy) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Name, b.Name))
	})
	layers := append(ordered, builtin.asBuiltin())
	bounded, messageBounded := map[string][]cost.Field{}, map[string][]cost.Field{}
	for _, p := range append(slices.Clone(layers), builtin.safety) {
		if p != nil {
			bounded[p.Name] = p.bounds.Read(p.reads)
			messageBounded[p.Name] = slices.DeleteFunc(p.bounds.Read(p.messageReads), func(f cost.Field) bool {
				return slices.ContainsFunc(bounded[p.Name], f.Is)
			})
		}
	}
	return &Set{layers: layers, safety: builtin.safety, limits: builtin.limits, bounded: bounded, messageBounded: messageBounded}
}

// inputPath is the path of a PolicyError for an input beyond the bounds.
const inputPath = "input"

// asBuiltin is a copy of p named BuiltinPolicy, always Enforce and Fail.
func (p *Policy) asBuiltin() *Policy {
	b := *p
	b.Name, b.Mode, b.FailurePolicy = BuiltinPolicy, v1alpha1.PolicyModeEnforce, v1alpha1.FailurePolicyFail
	return &b
}

// Policies returns the names of the set's installed policies in evaluation order.
func (s *Set) Policies() []string {
	names := make([]string, 0, len(s.layers)-1)
	for _, p := range s.layers[:len(s.layers)-1] {
		names = append(names, p.Name)
	}
	return names
}

// Options tune one Decide call.
type Options struct {
	// Explain records the input in Trace.Input, the evaluated variables in Trace.Variables
	// and the replaced rules in Trace.Replaced (dry-run and CLI); the controller leaves it
	// off, so that it never spends time formatting what nobody reads. Formatting a policy's
	// variables draws on what the decision left of its cost account's budget.
	Explain bool
}

// Decide evaluates one interface under the semantics of DESIGN.md §3.3. The matching Enforce
// policies, in order and the built-in default last, are layered: for allocation and for hotplug
// the first policy that sets it decides (an allocation of "Pass" leaves it to the next); skip
// rules accumulate in policy then rule order, a rule replacing the same-named rules of later
// policies, and the first true one skips. Skip rules and hotplug see the decided allocation.
// Then the safety policy checks an interface attached with an address. An evaluation error
// under failurePolicy Fail skips the interface with ReasonPolicyError; under Ignore the policy
// is passed over as if it did not match. Audit policies record what they would decide. What
// Audit and Ignore policies (and Audit records) cost is charged to an account of its own
// (Limits.TrialCostBudget), so that they can never spend the budget an enforced policy needs.
//
// A removed interface (one the spec no longer names: Input.removed) is only asked hotplug: its
// allocation is the applied one, it is never skipped. An interface the spec names whose
// decision detaches it has Change.Kind ChangeRemove too, and is decided as any other.
//
// Decide never returns an error and never panics on bad input; it is deterministic for a given
// input. A failed evaluation always has AllocationUnknown.
//
// Decide answers within the deadline and a grace of a quarter of it even when a library call
// cannot be interrupted (its work grows with a value, not with the cost CEL charges): the
// evaluation runs on a goroutine of its own (evaluators.go), and when it has not finished by
// then it is abandoned — it runs on to its end, holding no caller — and the answer is a
// PolicyError.
//
// The deadline is blamed on the expression during which it passed, even one that finished
// just after it. When that expression is an Audit policy's or a failurePolicy Ignore
// policy's, and the interface failed for it, the interface is evaluated again without that
// policy under a fresh deadline (at most maxPassedOver times, within ctx): an Audit policy
// never decides and an Ignore policy is passed over, so neither may take the interface down
// by being slow. The policy is recorded as an Audit record with the error, or in Ignored.
func (s *Set) Decide(ctx context.Context, in Input, opts Options) Decision {
	var passed []*policyError // the errors of the trial or Ignore policies that ran out of time
	set := s
	for {
		d, late := set.decideOnce(ctx, in, opts)
		p := set.passOver(d, late)
		if p == nil || len(passed) == maxPassedOver || ctx.Err() != nil {
			return stableWhenLate(ctx, withPassedOver(d, passed), s.limits.Deadline)
		}
		passed = append(passed, &policyError{p, late.path, lateError(d, late, s.limits.Deadline)})
		set = set.without(p.Name)
	}
}

// stableWhenLate gives a decision d that failed for want of time a message naming its policy
// and the deadline only: which of a slow policy's expressions was running when the time ran
// out, and whether its call was interrupted or abandoned, vary with the machine's load, and a
// NetworkReady message that changes from retry to retry is rewritten, and an event raised,
// each time. The precise error, naming the expression, stays first in the
// trace's errors, which the dry run and ipamctl show.
// When the caller's context (ctx: the VM's budget, a dry-run request) ended, its cause is
// named instead of the deadline.
func stableWhenLate(ctx context.Context, d Decision, deadline time.Duration) Decision {
	if d.Reason != ReasonPolicyError || !d.DeadlineExceeded || d.Policy == "" {
		return d
	}
	if !slices.Contains(d.Trace.Errors, d.Message) {
		d.Trace.Errors = append([]string{d.Message}, d.Trace.Errors...)
	}
	why := fmt.Sprintf("the evaluation did not finish within the deadline (%v)", deadline)
	if ctx.Err() != nil {
		why = "not evaluated: " + context.Cause(ctx).Error()
	}
	d.Message = fmt.Sprintf("policy %s: %s; the dry run's trace names the expression", d.Policy, why)
	return d
}

// lateError is the error of late's expression in d's trace, or one naming the deadline.
func lateError(d Decision, late where, deadline time.Duration) error {
	prefix := "policy " + late.p.Name + ": " + late.path + ": "
	for _, e := range append([]string{d.Message}, d.Trace.Errors...) {
		if rest, ok := strings.CutPrefix(e, prefix); ok {
			return errors.New(rest)
		}
	}
	return fmt.Errorf("the deadline (%v) passed while it was evaluated: %w", deadline, context.DeadlineExceeded)
}

// maxPassedOver bounds how many Audit or Ignore policies one Decide passes over for running out
// of time: each costs at most a deadline and its grace (the caller's context, the VM's budget,
// bounds the whole as well).
const maxPassedOver = 2

// passOver returns the Audit or failurePolicy Ignore policy to evaluate the interface without:
// d failed (a PolicyError) because the deadline passed, or an evaluation was abandoned, while
// that policy's expression ran. Such a policy never decides (Audit) or is passed over on error
// (Ignore), so its slowness must not fail the interface: it is evaluated again without it, with
// a fresh deadline.
func (s *Set) passOver(d Decision, late where) *Policy {
	if d.Reason != ReasonPolicyError || late.p == nil {
		return nil
	}
	for _, p := range s.layers[:len(s.layers)-1] {
		if p.Name == late.p.Name && (p.Mode == v1alpha1.PolicyModeAudit || p.FailurePolicy == v1alpha1.FailurePolicyIgnore) {
			return p
		}
	}
	return nil
}

// without is s without the policy named name.
func (s *Set) without(name string) *Set {
	out := *s
	out.layers = slices.DeleteFunc(slices.Clone(s.layers), func(p *Policy) bool { return p.Name == name })
	return &out
}

// withPassedOver records in d the policies passed over for running out of time: an Audit
// policy as an Audit record with the error, an Ignore policy in Ignored; both in Errors and
// Failures.
func withPassedOver(d Decision, passed []*policyError) Decision {
	for _, e := range passed {
		d.Trace.Errors = append(d.Trace.Errors, e.Error())
		d.Trace.Failures = append(d.Trace.Failures, e.failure())
		if e.p.Mode == v1alpha1.PolicyModeAudit {
			d.Trace.Audit = append(d.Trace.Audit, AuditRecord{Policy: e.p.Name, Error: e.Error()})
		} else {
			d.Trace.Ignored = append(d.Trace.Ignored, e.p.Name)
		}
	}
	return d
}

// decideOnce is one evaluation of Decide under its own deadline; late is the expression
// during which the deadline passed (or the one abandoned), zero when it did not pass.
func (s *Set) decideOnce(ctx context.Context, in Input, opts Options) (Decision, where) {
	ctx, cancel := context.WithTimeout(ctx, s.limits.Deadline)
	defer cancel()
	done := make(chan Decision, 1) // buffered: an abandoned evaluation must not block
	at := &site{}
	runEvaluation(func() { done <- s.evaluate(ctx, in, opts, at) })
	select {
	case d := <-done:
		return outOfTime(ctx, d, at.lateSite())
	case <-ctx.Done():
	}
	grace := time.NewTimer(max(s.limits.Deadline/4, 10*time.Millisecond))
	defer grace.Stop()
	select {
	case d := <-done:
		return outOfTime(ctx, d, at.lateSite())
	case <-grace.C:
		abandoned.Add(1)
		p, path := at.get()
		if p == nil { // stuck before any expression: blame the set as a whole
			p, path = s.layers[len(s.layers)-1], "spec"
		}
		d := (&policyError{p, path, fmt.Errorf(
			"evaluation did not finish within the deadline (%v): a library call could not be interrupted, so it was abandoned", s.limits.Deadline)}).decision()
		d.Trace.Errors = []string{d.Message}
		// What the finished expressions cost; the abandoned call's own cost is unknown.
		d.Cost = at.spent.Load()
		d.DeadlineExceeded = true
		return d, where{p, path}
	}
}

// outOfTime marks a failed decision d DeadlineExceeded when the deadline passed during one of
// its expressions (late) or the evaluation's context (ctx: the deadline, the caller's) had
// ended by the time it failed, whichever expression the error names: an expression not
// evaluated because the time was up, or one cel-go interrupted, fails for want of time. A
// cost or runtime error in the microseconds before the deadline is classed with them; the
// caller's retry then fails the same way again (docs/RELIABILITY.md).
func outOfTime(ctx context.Context, d Decision, late where) (Decision, where) {
	if d.Reason == ReasonPolicyError && (late.p != nil || ctx.Err() != nil) {
		d.DeadlineExceeded = true
	}
	return d, late
}

// site is where an evaluation is: the policy and field path of the expression being
// evaluated (a variable's while the expression reading it waits for it). Decide reads it
// from another goroutine when it abandons the evaluation, to name the expression that did
// not finish rather than whichever policy happens to be last.
type site struct {
	mu  sync.Mutex
	now where
	// late is the expression during which the deadline passed, set once.
	late where
	// spent is the cost charged so far (run.cost), for an abandoned evaluation's Decision.
	spent atomic.Int64
}

// markLate records p's expression at path as the one during which the deadline passed,
// unless one was recorded already.
func (s *site) markLate(p *Policy, path string) {
	s.mu.Lock()
	if s.late.p == nil {
		s.late = where{p, path}
	}
	s.mu.Unlock()
}

// lateSite is the expression during which the deadline passed; zero when it did not.
func (s *site) lateSite() where {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.late
}

// where is an expression of a policy: its field path, e.g. spec.variables[0].expression.
type where struct {
	p    *Policy
	path string
}

// enter records that p's expression at path is being evaluated and returns the one it
// replaced, for leave.
func (s *site) enter(p *Policy, path string) (prev where) {
	s.mu.Lock()
	prev, s.now = s.now, where{p, path}
	s.mu.Unlock()
	return prev
}

// leave restores the expression enter replaced: the one whose variable was just evaluated.
func (s *site) leave(prev where) { s.enter(prev.p, prev.path) }

// get returns the expression being evaluated; a nil policy before any expression.
func (s *site) get() (*Policy, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now.p, s.now.path
}

// abandoned counts the evaluations Decide stopped waiting for (they run on to their end).
var abandoned atomic.Int64

// Abandoned returns how many evaluations Decide gave up waiting for since the process
// started, for a metric.
func Abandoned() int64 { return abandoned.Load() }

// evaluate is Decide's work, run on an evaluator goroutine (evaluators.go).
func (s *Set) evaluate(ctx context.Context, in Input, opts Options, at *site) Decision {
	in.normalize()
	r := &run{ctx: ctx, in: &in, explain: opts.Explain, at: at,
		enforced: account{name: "interface", budget: s.limits.InterfaceCostBudget},
		trial:    account{name: "trial", budget: s.limits.TrialCostBudget}}
	r.bounded, r.messageBounded = s.bounded, s.messageBounded
	d := s.decide(r)
	d.Cost = r.cost()
	if opts.Explain {
		d.Trace.Variables = r.variableTrace()
		d.Trace.Input = &in
	}
	return d
}

func (s *Set) decide(r *run) Decision {
	matched, failure := r.matching(s.layers)
	var d Decision
	if failure != nil {
		d = failure.decision()
	} else {
		d, _, _ = r.layered(enforcing(matched, nil), s.safety, true)
	}
	for _, p := range s.layers {
		if p.Mode != v1alpha1.PolicyModeAudit {
			continue
		}
		if rec, failed := r.auditErrors[p.Name]; failed {
			d.Trace.Audit = append(d.Trace.Audit, rec)
		} else if failure == nil && slices.Contains(matched, p) {
			d.Trace.Audit = append(d.Trace.Audit, r.audit(matched, p, s.safety))
		}
	}
	d.Trace.Matched, d.Trace.Ignored, d.Trace.Errors = r.trace.Matched, r.trace.Ignored, r.trace.Errors
	d.Trace.Failures = r.trace.Failures
	markDiffering(&d)
	return d
}

// enforcing returns the Enforce policies of matched, and promoted (an Audit policy of matched)
// as if it were one.
func enforcing(matched []*Policy, promoted *Policy) []*Policy {
	var out []*Policy
	for _, p := range matched {
		switch {
		case p == promoted:
			q := *p
			q.Mode = v1alpha1.PolicyModeEnforce
			out = append(out, &q)
		case p.Mode == v1alpha1.PolicyModeEnforce:
			out = append(out, p)
		}
	}
	return out
}

// matching evaluates the match of every layer and returns the matching ones in order; or the
// failure of a Fail Enforce policy whose matchConditions could not be evaluated. An Ignore
// policy whose matchConditions fail does not match; an Audit policy's failure is recorded.
func (r *run) matching(layers []*Policy) ([]*Policy, *policyError) {
	var out []*Policy
	for _, p := range layers {
		ok, err := r.matches(p)
		if err == nil && !ok && p.Name == BuiltinPolicy {
			err = &policyError{p, "spec.match", errors.New("the built-in policy does not match the interface")}
		}
		switch {
		case err != nil && p.Mode == v1alpha1.PolicyModeAudit:
			r.trace.Errors = append(r.trace.Errors, err.Error())
			r.failed(err)
			if r.auditErrors == nil {
				r.auditErrors = map[string]AuditRecord{}
			}
			r.auditErrors[p.Name] = AuditRecord{Policy: p.Name, Error: err.Error()}
		case err != nil && p.FailurePolicy == v1alpha1.FailurePolicyIgnore:
			r.trace.Errors = append(r.trace.Errors, err.Error())
			r.trace.Ignored = append(r.trace.Ignored, p.Name)
			r.failed(err)
		case err != nil:
			r.trace.Matched = append(r.trace.Matched, p.Name)
			r.trace.Errors = append(r.trace.Errors, err.Error())
			return nil, asPolicyError(p, err)
		case ok:
			r.trace.Matched = append(r.trace.Matched, p.Name)
			out = append(out, p)
		}
	}
	return out, nil
}

// layered decides with the given Enforce policies. An Ignore policy that fails is passed
// over by starting again without it, so that none of its parts counts; the errors of those
// passed over are returned. With record, errors and passed-over policies go into the run's
// trace (not for audit runs).
//
// Every retry starts from the accounts as they were before the first attempt (run.restore):
// the policies evaluated again are charged once, so that no failing trial policy — however
// many fail, and whatever they spent — makes an enforced one cross its budget. At most
// maxIgnoreRetries retries pass one policy over each; the attempt after them passes over every
// Ignore policy left, unevaluated, so that the work on one interface stays within
// (maxIgnoreRetries + 2) attempts of both budgets.
func (r *run) layered(enforce []*Policy, safety *Policy, record bool) (d Decision, ignored []*policyError, failed *policyError) {
	start := r.accounts()
	for retry := 0; ; retry++ {
		if retry > 0 {
			r.restore(start)
		}
		if retry > maxIgnoreRetries {
			enforce = r.passOverIgnored(enforce, record, &ignored)
		}
		a := r.attempt(enforce, safety)
		if a.err == nil {
			if record {
				r.trace.Errors = append(r.trace.Errors, a.errors...)
			}
			return a.d, ignored, nil
		}
		if record {
			r.trace.Errors = append(r.trace.Errors, a.err.Error())
		}
		isFailed := func(p *Policy) bool { return p.Name == a.err.p.Name }
		if a.err.p.FailurePolicy != v1alpha1.FailurePolicyIgnore || !slices.ContainsFunc(enforce, isFailed) {
			return a.err.decision(), ignored, a.err
		}
		ignored = append(ignored, a.err)
		if record {
			r.trace.Ignored = append(r.trace.Ignored, a.err.p.Name)
			r.failed(a.err)
		}
		enforce = slices.DeleteFunc(slices.Clone(enforce), isFailed)
	}
}

// maxIgnoreRetries bounds the failurePolicy Ignore policies one layered evaluation passes over
// one at a time, each with a retry; past it, the rest are passed over unevaluated.
const maxIgnoreRetries = 8

// passOverIgnored removes the Ignore policies from enforce, recording each as passed over
// without being evaluated.
func (r *run) passOverIgnored(enforce []*Policy, record bool, ignored *[]*policyError) []*Policy {
	return slices.DeleteFunc(slices.Clone(enforce), func(p *Policy) bool {
		if p.FailurePolicy != v1alpha1.FailurePolicyIgnore {
			return false
		}
		err := &policyError{p, "spec", fmt.Errorf("passed over without being evaluated: %d failurePolicy Ignore policies "+
			"failed before it on this interface, the most one evaluation retries", maxIgnoreRetries+1)}
		*ignored = append(*ignored, err)
		if record {
			r.trace.Errors = append(r.trace.Errors, err.Error())
			r.trace.Ignored = append(r.trace.Ignored, p.Name)
			r.failed(err)
		}
		return true
	})
}

// audit is what the decision would be were the Audit policy p (one of matched) an Enforce
// policy; its own evaluation error is recorded as the record's Error.
func (r *run) audit(matched []*Policy, p *Policy, safety *Policy) AuditRecord {
	r.auditing = p
	defer func() { r.auditing = nil }()
	d, ignored, failed := r.layered(enforcing(matched, p), safety, false)
	for _, e := range ignored {
		if e.p.Name == p.Name {
			return r.auditError(p, e)
		}
	}
	if failed != nil && d.Provenance.Skip == p.Name {
		return r.auditError(p, failed)
	}
	return d.audit(p.Name)
}

func (r *run) auditError(p *Policy, err *policyError) AuditRecord {
	r.trace.Errors = append(r.trace.Errors, err.Error())
	r.failed(&policyError{p, err.path, err.err})
	return AuditRecord{Policy: p.Name, Error: err.Error()}
}

func (d Decision) audit(policy string) AuditRecord {
	return AuditRecord{Policy: policy, Allocation: d.Allocation, Skip: d.Skip, Reason: d.Reason,
		Message: d.Message, Hotplug: d.Hotplug, Rule: d.Rule, Provenance: d.Provenance}
}

// failed records err, of a policy whose mode or failurePolicy keeps it from deciding, in the
// trace's Failures.
func (r *run) failed(err *policyError) {
	r.trace.Failures = append(r.trace.Failures, err.failure())
}

// failure is e as a PolicyFailure.
func (e *policyError) failure() PolicyFailure {
	return PolicyFailure{Policy: e.p.Name, Mode: e.p.Mode, FailurePolicy: e.p.FailurePolicy, Field: e.path,
		Error: cut(fmt.Sprint(e.err), maxFailureSample)}
}

// markDiffering sets Differs on each of d's Audit records that decides otherwise than d.
func markDiffering(d *Decision) {
	for i, rec := range d.Trace.Audit {
		d.Trace.Audit[i].Differs = rec.Error == "" && (rec.Allocation != d.Allocation || rec.Skip != d.Skip ||
			rec.Reason != d.Reason || rec.Hotplug != d.Hotplug)
	}
}

// policyError is an evaluation error of one expression of one policy.
type policyError struct {
	p    *Policy
	path string
	err  error
}

// maxErrorText bounds the error part of a policyError's text. CEL's errors quote the value
// they failed on (timestamp() a 256 KiB annotation): unbounded, one interface's PolicyError
// filled the whole NetworkReady message, and the other interfaces' items were cut off.
const maxErrorText = 512

// Error renders "policy <name>: <field path>: <error>", the error cut to maxErrorText bytes.
func (e *policyError) Error() string {
	return fmt.Sprintf("policy %s: %s: %s", e.p.Name, e.path, cut(fmt.Sprint(e.err), maxErrorText))
}

// Unwrap returns the CEL error, so that errors.Is(err, context.DeadlineExceeded) works.
func (e *policyError) Unwrap() error { return e.err }

// asPolicyError returns err as a *policyError, attributing an unexpected error to p.
func asPolicyError(p *Policy, err error) *policyError {
	var pe *policyError
	if errors.As(err, &pe) {
		return pe
	}
	return &policyError{p, "spec", err}
}

// decision is the Decision of a policy that failed under failurePolicy Fail: skipped, with the
// allocation unknown so that nothing existing is deleted.
func (e *policyError) decision() Decision {
	return Decision{Allocation: AllocationUnknown, Skip: true, Reason: ReasonPolicyError,
		Message: e.Error(), Policy: e.p.Name, Provenance: Provenance{Skip: e.p.Name}}
}

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
