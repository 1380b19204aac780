package evaluator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// run is the state of one interface evaluation: its input, deadline, cost budget, the
// activations of the policies evaluated (their variables are evaluated at most once) and the
// trace built so far.
type run struct {
	ctx context.Context
	in  *Input
	// enforced is the cost account of the policies that may decide or take the interface
	// down (Enforce policies with failurePolicy Fail, the built-in default, the safety
	// policy); trial is that of the policies that may not (Audit policies, Ignore policies,
	// and every expression an Audit record re-evaluates). Each holds its own budget, so
	// that what a trial policy spends can never make an enforced one exceed the budget and
	// be blamed for it; the work on one interface stays bounded by the two budgets together.
	enforced, trial account
	// refilled is what the attempts a retry started over from (run.restore) had spent: it
	// stays in Decision.Cost.
	refilled int64
	// auditing is the Audit policy whose record run.audit is evaluating (nil otherwise):
	// everything evaluated then is charged to trial, and crossing its budget is that
	// policy's error.
	auditing *Policy
	trace    Trace
	// bounded are the input fields each policy reads (Set.bounded), checked against their
	// bounds when the policy is first evaluated; fields memoizes those checks.
	bounded map[string][]cost.Field
	// messageBounded are the fields only each policy's messageExpressions read
	// (Set.messageBounded).
	messageBounded map[string][]cost.Field
	fields         cost.Checks
	// acts are the activations of the policies evaluated, a policy's found by its name.
	acts []*activation
	// auditErrors are the records of Audit policies whose matchConditions failed, by name
	// (nil until one does).
	auditErrors map[string]AuditRecord
	// allocation is the decided allocation, which skip rules and hotplug see; allocationVal
	// is it as a CEL value, made once.
	allocation    Allocation
	allocationVal ref.Val
	// explain: Options.Explain; also list the replaced rules in the trace.
	explain bool
	// at is the expression being evaluated, for Decide to name when it abandons the run.
	at *site
}

// attempt is one layered evaluation: the decision, or the error of the policy that failed,
// and the messageExpression errors that fell back to static messages.
type attempt struct {
	d      Decision
	err    *policyError
	errors []string
}

// attempt layers the Enforce policies (in order, the built-in default last) and, for an
// interface attached with an address, the safety policy.
func (r *run) attempt(enforce []*Policy, safety *Policy) attempt {
	a := attempt{d: Decision{Hotplug: true}}
	removed := r.in.removed()
	if removed {
		a.d.Allocation = Allocation(r.in.Change.From.Allocation)
	} else if a.err = r.allocate(enforce, &a.d); a.err != nil {
		return a
	}
	r.allocation, r.allocationVal = a.d.Allocation, nil
	if !removed {
		if r.explain {
			a.d.Trace.Replaced = replacements(enforce)
		}
		if a.err = r.skipRules(enforce, &a); a.err != nil {
			return a
		}
	}
	if a.err = r.hotplug(enforce, &a.d); a.err != nil {
		return a
	}
	if !removed && !a.d.Skip && (a.d.Allocation == AllocationAuto || a.d.Allocation == AllocationStatic) {
		if a.err = r.rules(safety, safety.skipRules, &a); a.err != nil {
			return a
		}
	}
	a.d.Policy = cmp.Or(a.d.Provenance.Skip, a.d.Provenance.Allocation)
	return a
}

// allocate: the first policy that sets allocation and does not return Pass decides.
func (r *run) allocate(enforce []*Policy, d *Decision) *policyError {
	for _, p := range enforce {
		if p.allocation == nil {
			continue
		}
		v, err := r.eval(p, *p.allocation, r.activation(p))
		if err != nil {
			return err
		}
		s, isString := v.Value().(string)
		switch {
		case !isString:
			// Formatted within bounds: the value may be a list of millions built for one unit.
			shown, _ := formatValue(v, maxTraceValueLength)
			return &policyError{p, p.allocation.path, fmt.Errorf("evaluated to %s (%s), want one of the strings Auto, Static, None, Pass",
				shown, v.Type().TypeName())}
		case s == AllocationPass:
			d.Trace.Passed = append(d.Trace.Passed, p.Name)
			continue
		case !validAllocation(s):
			return &policyError{p, p.allocation.path, fmt.Errorf("evaluated to %q, want one of Auto, Static, None, Pass", truncate(s))}
		}
		d.Allocation, d.Provenance.Allocation = Allocation(s), p.Name
		return nil
	}
	last := enforce[len(enforce)-1]
	return &policyError{last, "spec.allocation.expression",
		errors.New("no policy decided the allocation: every policy that sets it returned Pass")}
}

// skipRules evaluates the accumulated skip rules, policy by policy; a rule named like a rule
// of an earlier policy is replaced (not evaluated).
func (r *run) skipRules(enforce []*Policy, a *attempt) *policyError {
	seen := map[string]bool{}
	for _, p := range enforce {
		var rules []skipRule
		for _, rule := range p.skipRules {
			if !seen[rule.name] {
				rules = append(rules, rule)
			}
		}
		for _, rule := range p.skipRules {
			seen[rule.name] = true
		}
		if err := r.rules(p, rules, a); err != nil || a.d.Skip {
			return err
		}
	}
	return nil
}

// rules applies the first of p's rules that holds.
func (r *run) rules(p *Policy, rules []skipRule, a *attempt) *policyError {
	act := r.activation(p)
	for _, rule := range rules {
		hit, err := r.evalBool(p, rule.program, act)
		if err != nil {
			return err
		}
		if hit {
			a.d.Skip, a.d.Reason, a.d.Rule, a.d.Provenance.Skip = true, Reason(rule.reason), rule.name, p.Name
			a.d.Message = r.message(p, rule, act, a)
			return nil
		}
	}
	return nil
}

// replacements lists the rules of enforce that an earlier policy's rule of the same name
// replaces; the built-in default's rules replaced by the installed default (its own copy) are
// not worth listing.
func replacements(enforce []*Policy) []Replacement {
	by := map[string]string{}
	var out []Replacement
	for _, p := range enforce {
		for _, rule := range p.skipRules {
			first, ok := by[rule.name]
			if ok && first != p.Name && (p.Name != BuiltinPolicy || first != policies.BuiltinName) {
				out = append(out, Replacement{Rule: rule.name, Policy: p.Name, By: first})
			}
		}
		for _, rule := range p.skipRules {
			if _, ok := by[rule.name]; !ok {
				by[rule.name] = p.Name
			}
		}
	}
	return out
}

// hotplug: the first policy that sets hotplug decides; true when none does.
func (r *run) hotplug(enforce []*Policy, d *Decision) *policyError {
	for _, p := range enforce {
		if p.hotplug == nil {
			continue
		}
		v, err := r.evalBool(p, *p.hotplug, r.activation(p))
		if err != nil {
			return err
		}
		d.Hotplug, d.Provenance.Hotplug = v, p.Name
		return nil
	}
	return nil
}

// matches evaluates p's match block and then its matchConditions as ValidatingAdmissionPolicy
// does: any false condition means no match, whatever errors the others raise; only when none
// is false does the first error count.
func (r *run) matches(p *Policy) (bool, *policyError) {
	if !p.matchesStatic(r.in) {
		return false, nil
	}
	act := r.activation(p)
	var first *policyError
	for _, mc := range p.matchConditions {
		ok, err := r.evalBool(p, mc.program, act)
		switch {
		case err != nil && first == nil:
			first = err
		case err == nil && !ok:
			return false, nil
		}
	}
	return first == nil, first
}

// maxMessageLength bounds a messageExpression's result, as Kubernetes does for
// ValidatingAdmissionPolicy (MaxEvaluatedMessageExpressionSizeBytes).
const maxMessageLength = 5 * 1024

// message is a fired rule's message: its messageExpression's result when that evaluates to a
// non-empty string of at most maxMessageLength bytes; else the static message (or the reason)
// followed by why the messageExpression was not used. The failure does not fail the decision;
// it is recorded in the trace's errors.
func (r *run) message(p *Policy, rule skipRule, act *activation, a *attempt) string {
	static := rule.message
	if static == "" {
		static = rule.reason
	}
	if rule.messageProgram == nil {
		return static
	}
	v, err := r.eval(p, *rule.messageProgram, act)
	if err == nil {
		err = checkMessage(p, rule, v)
	}
	if err == nil {
		s, _ := valueString(v)
		return s
	}
	a.errors = append(a.errors, err.Error())
	return fmt.Sprintf("%s (messageExpression failed: %v)", static, err)
}

// checkMessage says why v cannot be rule's message, or returns nil.
func checkMessage(p *Policy, rule skipRule, v ref.Val) *policyError {
	s, ok := valueString(v)
	switch {
	case !ok:
		// Formatted within bounds, as an allocation of the wrong type is: fmt.Sprint walked a
		// list of a million elements built for a few units, past the deadline.
		shown, _ := formatValue(v, maxTraceValueLength)
		return &policyError{p, rule.messageProgram.path,
			fmt.Errorf("evaluated to %s of type %s, not a string", shown, v.Type().TypeName())}
	case strings.TrimSpace(s) == "":
		return &policyError{p, rule.messageProgram.path, errors.New("evaluated to an empty message")}
	case len(s) > maxMessageLength:
		return &policyError{p, rule.messageProgram.path,
			fmt.Errorf("message of %d bytes exceeds the limit of %d", len(s), maxMessageLength)}
	default:
		if why := messageError(s); why != "" {
			return &policyError{p, rule.messageProgram.path, errors.New(why)}
		}
	}
	return nil
}

func valueString(v ref.Val) (string, bool) {
	if v == nil {
		return "", false
	}
	s, ok := v.Value().(string)
	return s, ok
}

func (r *run) evalBool(p *Policy, prog program, act *activation) (bool, *policyError) {
	v, err := r.eval(p, prog, act)
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, &policyError{p, prog.path, errNotBool}
	}
	return b, nil
}

// eval runs one program, charging its cost to p's account (accountOf). Every failure — a runtime
// error, the per-call cost limit, the budget, the deadline — is an error, never false. An
// error raised while evaluating a variable keeps the variable's path.
func (r *run) eval(p *Policy, prog program, act *activation) (ref.Val, *policyError) {
	v, _, err := r.evalCost(p, prog, act)
	return v, err
}

// evalCost is eval, also returning what the expression itself was charged (not the
// variables it evaluated on the way, charged by their own evaluations).
func (r *run) evalCost(p *Policy, prog program, act *activation) (ref.Val, int64, *policyError) {
	acct := r.accountOf(p)
	if err := r.mayRun(p, prog, act, acct); err != nil {
		return nil, 0, err
	}
	prev := r.at.enter(p, prog.path)
	defer r.at.leave(prev)
	var v ref.Val
	var det *cel.EvalDetails
	var err error
	if prog.interruptible {
		// The context is checked between comprehension iterations and before calls.
		v, det, err = prog.prog.ContextEval(r.ctx, act)
	} else {
		// Its few calls are all there is: the deadline was checked by mayRun.
		v, det, err = prog.prog.Eval(act)
	}
	var cost int64
	if det != nil && det.ActualCost() != nil {
		cost = int64(min(*det.ActualCost(), math.MaxInt64/2))
		acct.charge(p.Name, cost)
		r.at.spent.Store(r.cost())
	} else if err == nil {
		// Fail closed: an evaluation whose cost is unknown cannot be charged to the budget.
		err = errors.New("no runtime cost reading (cost tracking off)")
	}
	if err == nil && types.IsError(v) {
		err, _ = v.Value().(error)
	}
	if err == nil && r.ctx.Err() != nil {
		// The deadline passed during this expression (a call that could not be interrupted
		// finished late): this expression is the one to blame, not the next one evaluated.
		err = fmt.Errorf("finished after the deadline: %w", context.Cause(r.ctx))
	}
	if err != nil {
		var inner *policyError
		if !errors.As(err, &inner) {
			inner = &policyError{p, prog.path, err}
		}
		if r.ctx.Err() != nil {
			r.at.markLate(inner.p, inner.path)
		}
		return nil, cost, inner
	}
	if acct.spent > acct.budget {
		return nil, cost, r.overBudget(p, prog.path, acct)
	}
	return v, cost, nil
}

// mayRun is why prog must not run for p, nil when it may: it was not compiled, an input it
// reads is beyond its bounds, its account is spent, or the evaluation's context has ended.
func (r *run) mayRun(p *Policy, prog program, act *activation, acct *account) *policyError {
	switch {
	case prog.prog == nil:
		return &policyError{p, prog.path, errors.New("expression was not compiled")}
	case act.beyond != nil:
		return &policyError{p, inputPath, act.beyond}
	case prog.message && act.messageBeyond != nil:
		return &policyError{p, inputPath, act.messageBeyond}
	case acct.spent > acct.budget:
		// Spent already: nothing more runs on this account, so that the work on one
		// interface stays bounded by the budgets.
		return r.overBudget(p, prog.path, acct)
	case r.ctx.Err() != nil:
		// ContextEval only checks the context inside comprehensions and before calls.
		return &policyError{p, prog.path, fmt.Errorf("not evaluated: %w", context.Cause(r.ctx))}
	}
	return nil
}

// account is one cost account of an interface evaluation: its budget and what it spent, in
// CEL cost units.
type account struct {
	name          string // "interface" or "trial", for the error
	budget, spent int64
	// spenders are what each policy charged to it, in the order they first did: the budget's
	// error names the biggest, so that the policy that crossed it — perhaps a cheap one, the
	// built-in default — is not blamed for what those before it spent.
	spenders []spender
}

// spender is one policy's spend on an account.
type spender struct {
	policy string
	spent  int64
}

// charge adds cost, spent by policy, to the account.
func (a *account) charge(policy string, cost int64) {
	a.spent += cost
	for i := range a.spenders {
		if a.spenders[i].policy == policy {
			a.spenders[i].spent += cost
			return
		}
	}
	a.spenders = append(a.spenders, spender{policy, cost})
}

// biggestSpenders names the (at most) three policies that spent most of the account, with
// their spend, e.g. "policy a 150000, policy b 149990, policy builtin:default 11".
func (a *account) biggestSpenders() string {
	top := slices.Clone(a.spenders)
	slices.SortStableFunc(top, func(x, y spender) int { return cmp.Compare(y.spent, x.spent) })
	parts := make([]string, 0, 3)
	for _, s := range top[:min(len(top), 3)] {
		parts = append(parts, fmt.Sprintf("policy %s %d", s.policy, s.spent))
	}
	if len(top) > 3 {
		parts = append(parts, fmt.Sprintf("%d more", len(top)-3))
	}
	return strings.Join(parts, ", ")
}

// accountOf is the account p's expressions are charged to: trial for an Audit or failurePolicy
// Ignore policy and during an Audit record's evaluation, enforced otherwise.
func (r *run) accountOf(p *Policy) *account {
	if r.auditing != nil || !enforced(p) {
		return &r.trial
	}
	return &r.enforced
}

// enforced: p may decide or take the interface down (an Enforce policy with failurePolicy
// Fail: the built-in default and the safety policy are).
func enforced(p *Policy) bool {
	return p.Mode != v1alpha1.PolicyModeAudit && p.FailurePolicy != v1alpha1.FailurePolicyIgnore
}

// cost is what the evaluation spent on both accounts, and what restore took off them
// (Decision.Cost).
func (r *run) cost() int64 { return r.enforced.spent + r.trial.spent + r.refilled }

// accounts is a copy of both accounts, for restore.
func (r *run) accounts() [2]account {
	e, t := r.enforced, r.trial
	e.spenders, t.spenders = slices.Clone(e.spenders), slices.Clone(t.spenders)
	return [2]account{e, t}
}

// restore sets the accounts back to start (taken before the first attempt of a layered
// evaluation), so that a retry without a passed-over policy is charged only what it spends
// itself; what the abandoned attempts spent stays in Decision.Cost.
func (r *run) restore(start [2]account) {
	r.refilled += r.enforced.spent - start[0].spent + r.trial.spent - start[1].spent
	r.enforced, r.trial = start[0], start[1]
}

// overBudget is the error of the expression at path of p that took acct past its budget.
// During an Audit record's evaluation it is the audited policy's error, whichever policy's
// expression crossed the budget: the record is what spent it, and an enforced policy must
// never be blamed for a trial.
func (r *run) overBudget(p *Policy, path string, acct *account) *policyError {
	err := fmt.Errorf("%s cost budget %d exceeded (spent %d)", acct.name, acct.budget, acct.spent)
	if mostly := acct.spenders; len(mostly) > 1 {
		// Crossing it is this expression's error, but the spend may be others': say whose.
		err = fmt.Errorf("%s cost budget %d exceeded (spent %d, most by %s): the policies evaluated before "+
			"this one share the budget", acct.name, acct.budget, acct.spent, acct.biggestSpenders())
	}
	if r.auditing != nil && p.Name != r.auditing.Name {
		return &policyError{r.auditing, "spec", fmt.Errorf("evaluating its Audit record (at policy %s: %s): %w", p.Name, path, err)}
	}
	return &policyError{p, path, err}
}

// activation resolves the input variables and the policy's lazy `variables`.
type activation struct {
	r    *run
	p    *Policy
	vars variables
	// beyond is why the input is beyond the bounds of a field p reads (nil when within):
	// every expression of p then fails with it, before it runs.
	beyond error
	// messageBeyond is why the input is beyond the bounds of a field only p's
	// messageExpressions read: they fail with it, and fall back to their static messages.
	messageBeyond error
}

var _ interpreter.Activation = (*activation)(nil)

// activation returns p's activation, made on first use: its variables are evaluated at most
// once per interface, whichever part and attempt needs them. Making it checks the bounds of
// the input fields p reads: an input beyond them is p's error, handled by p's mode and
// failurePolicy like any other.
func (r *run) activation(p *Policy) *activation {
	for _, a := range r.acts {
		if a.p.Name == p.Name {
			return a
		}
	}
	a := &activation{r: r, p: p}
	if err := r.fields.Check(r.in, r.bounded[p.Name]); err != nil {
		a.beyond = fmt.Errorf("beyond the bounds the policy is compiled against: %w", err)
	}
	if err := r.fields.Check(r.in, r.messageBounded[p.Name]); err != nil {
		a.messageBeyond = fmt.Errorf("beyond the bounds the policy is compiled against: %w", err)
	}
	a.vars = variables{a: a, values: make([]ref.Val, len(p.variables)), visible: len(p.variables)}
	r.acts = append(r.acts, a)
	return a
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	in := a.r.in
	switch name {
	case "vm":
		return &in.VM, true
	case "interface":
		return &in.Interface, true
	case "network":
		return &in.Network, true
	case "ipAddress":
		return &in.IPAddress, true
	case "holders":
		return &in.Holders, true
	case "namespaceObject":
		return &in.Namespace, true
	case "change":
		return &in.Change, true
	case "variables":
		return &a.vars, true
	case "allocation":
		return a.r.allocationValue(), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

// variableTrace renders the evaluated variables of every policy, by policy name, drawing
// the formatting on what the decision left of the policy's account's budget (it is work on CEL values that CEL's cost accounting
// does not see). Once the budget is spent the values are cut short ("…"); the decision is
// already made and does not depend on it, so that the controller (which never asks for a
// trace) and the dry run decide alike.
func (r *run) variableTrace() map[string]map[string]string {
	out := map[string]map[string]string{}
	acts := slices.SortedFunc(slices.Values(r.acts), func(a, b *activation) int { return cmp.Compare(a.p.Name, b.p.Name) })
	for _, a := range acts {
		if vars := a.variableTrace(r); vars != nil {
			out[a.p.Name] = vars
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func (a *activation) variableTrace(r *run) map[string]string {
	var out map[string]string
	for _, i := range a.vars.evaluated() {
		if out == nil {
			out = map[string]string{}
		}
		acct := r.accountOf(a.p)
		s, cost := formatValue(a.vars.values[i], max(acct.budget-acct.spent, 0))
		acct.charge(a.p.Name, cost)
		out[a.p.variables[i].name] = s
	}
	return out
}

// allocationValue is `allocation`, the decided allocation, as a CEL value.
func (r *run) allocationValue() ref.Val {
	if r.allocationVal == nil {
		r.allocationVal = types.String(r.allocation)
	}
	return r.allocationVal
}
