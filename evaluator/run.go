package evaluator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// run is the state of one interface evaluation: its input, deadline, cost budget and the
// trace built so far.
type run struct {
	ctx    context.Context
	in     *Input
	budget int64
	spent  int64
	trace  Trace
}

// policy evaluates one policy on the interface: whether it matches and, if so, its decision.
// d.Trace.Variables holds the variables evaluated, also when err is set.
func (r *run) policy(p *Policy) (d Decision, matched bool, err error) {
	act := r.activation(p)
	defer func() { d.Trace.Variables = act.variableTrace() }()
	if matched, err = r.matchesWith(p, act); err != nil || !matched {
		return d, false, err
	}
	d = Decision{Policy: p.Name, Hotplug: true}
	alloc, err := r.eval(p, p.allocation, act)
	if err != nil {
		return d, true, err
	}
	s, _ := alloc.Value().(string)
	if !validAllocation(s) {
		return d, true, &policyError{p.Name, p.allocation.path,
			fmt.Errorf("evaluated to %q, want one of Auto, Static, None", s)}
	}
	d.Allocation = Allocation(s)
	if err := r.skipRules(p, act, &d); err != nil {
		return d, true, err
	}
	if p.hotplug != nil {
		if d.Hotplug, err = r.evalBool(p, *p.hotplug, act); err != nil {
			return d, true, err
		}
	}
	return d, true, nil
}

func (r *run) matches(p *Policy) (bool, error) { return r.matchesWith(p, r.activation(p)) }

func (r *run) matchesWith(p *Policy, act *activation) (bool, error) {
	if !p.matchesStatic(r.in) {
		return false, nil
	}
	for _, mc := range p.matchConditions {
		ok, err := r.evalBool(p, mc.program, act)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// skipRules applies the first rule that holds.
func (r *run) skipRules(p *Policy, act *activation, d *Decision) error {
	for _, rule := range p.skipRules {
		hit, err := r.evalBool(p, rule.program, act)
		if err != nil {
			return err
		}
		if hit {
			d.Skip, d.Reason, d.Rule = true, Reason(rule.reason), rule.name
			d.Message = r.message(p, rule, act)
			return nil
		}
	}
	return nil
}

// maxMessageLength bounds a messageExpression's result, as Kubernetes does for
// ValidatingAdmissionPolicy (MaxEvaluatedMessageExpressionSizeBytes).
const maxMessageLength = 5 * 1024

// message is a fired rule's message: its messageExpression's result when that evaluates to a
// non-empty string of at most maxMessageLength bytes; else the static message (or the reason)
// followed by why the messageExpression was not used. The failure does not fail the decision;
// it is recorded in the trace's errors.
func (r *run) message(p *Policy, rule skipRule, act *activation) string {
	static := rule.message
	if static == "" {
		static = rule.reason
	}
	if rule.messageProgram == nil {
		return static
	}
	v, err := r.eval(p, *rule.messageProgram, act)
	if err == nil {
		s, ok := valueString(v)
		switch {
		case !ok:
			err = &policyError{p.Name, rule.messageProgram.path, errors.New("did not evaluate to a string")}
		case strings.TrimSpace(s) == "":
			err = &policyError{p.Name, rule.messageProgram.path, errors.New("evaluated to an empty message")}
		case len(s) > maxMessageLength:
			err = &policyError{p.Name, rule.messageProgram.path,
				fmt.Errorf("message of %d bytes exceeds the limit of %d", len(s), maxMessageLength)}
		default:
			return s
		}
	}
	r.trace.Errors = append(r.trace.Errors, err.Error())
	return fmt.Sprintf("%s (messageExpression failed: %v)", static, err)
}

func valueString(v ref.Val) (string, bool) {
	if v == nil {
		return "", false
	}
	s, ok := v.Value().(string)
	return s, ok
}

func (r *run) evalBool(p *Policy, prog program, act *activation) (bool, error) {
	v, err := r.eval(p, prog, act)
	if err != nil {
		return false, err
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, &policyError{p.Name, prog.path, errNotBool}
	}
	return b, nil
}

// eval runs one program, charging its cost to the interface budget. Every failure — a runtime
// error, the per-call cost limit, the budget, the deadline — is an error, never false. An
// error raised while evaluating a variable keeps the variable's path.
func (r *run) eval(p *Policy, prog program, act *activation) (ref.Val, error) {
	if prog.prog == nil {
		return nil, &policyError{p.Name, prog.path, errors.New("expression was not compiled")}
	}
	if err := r.ctx.Err(); err != nil {
		// ContextEval only checks the context inside comprehensions.
		return nil, &policyError{p.Name, prog.path, fmt.Errorf("not evaluated: %w", context.Cause(r.ctx))}
	}
	v, det, err := prog.prog.ContextEval(r.ctx, act)
	if det != nil && det.ActualCost() != nil {
		r.spent += int64(*det.ActualCost())
	}
	if err == nil && types.IsError(v) {
		err, _ = v.Value().(error)
	}
	if err != nil {
		var inner *policyError
		if errors.As(err, &inner) {
			return nil, inner
		}
		return nil, &policyError{p.Name, prog.path, err}
	}
	if r.spent > r.budget {
		return nil, &policyError{p.Name, prog.path,
			fmt.Errorf("interface cost budget %d exceeded (spent %d)", r.budget, r.spent)}
	}
	return v, nil
}

// activation resolves the input variables and the policy's lazy `variables`.
type activation struct {
	r      *run
	p      *Policy
	vars   *lazy.MapValue
	values map[string]ref.Val // evaluated variables, for the trace
}

var _ interpreter.Activation = (*activation)(nil)

func (r *run) activation(p *Policy) *activation {
	a := &activation{r: r, p: p, values: map[string]ref.Val{}}
	a.vars = lazy.NewMapValue(p.variablesType.CelType())
	for _, v := range p.variables {
		a.vars.Append(v.name, func(*lazy.MapValue) ref.Val {
			val, err := r.eval(p, v.program, a)
			if err != nil {
				return types.WrapErr(err)
			}
			a.values[v.name] = val
			return val
		})
	}
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
		return a.vars, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

func (a *activation) variableTrace() map[string]string {
	if len(a.values) == 0 {
		return nil
	}
	out := make(map[string]string, len(a.values))
	for k, v := range a.values {
		out[k] = formatValue(v)
	}
	return out
}
