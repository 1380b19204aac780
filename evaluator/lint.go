package evaluator

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Warning is something about a policy that compiles but is probably not what its author
// meant; `ipamctl lint` prints warnings and the admission webhook returns them.
type Warning struct {
	// Field is the field path, e.g. spec.skipRules[0].message.
	Field string
	// Message says what is wrong and what to do instead.
	Message string
}

// String renders "<field>: <message>".
func (w Warning) String() string { return w.Field + ": " + w.Message }

// Lint compiles p as a new policy and returns what is suspicious in it alone: a skip rule's
// static message that looks like a CEL expression (it is shown as typed), under failurePolicy
// Ignore expressions that fail on an absent map key (the policy is then silently passed
// over), and what compiling found (Policy.Warnings: an estimate beyond the per-call limit).
// Compile errors are Compile's business; Lint returns none.
//
// Every type check Lint does (the policy's expressions and the messages) draws on one
// MaxPolicyCheckWork account, so Lint costs the webhook no more than Compile's bound.
func (c *Compiler) Lint(p *v1alpha1.ClusterIPAMPolicy) []Warning {
	out, _ := c.lint(p)
	return out
}

// lint is Lint that also returns the checkWork it spent, at most MaxPolicyCheckWork.
func (c *Compiler) lint(p *v1alpha1.ClusterIPAMPolicy) ([]Warning, uint64) {
	cc := &compilation{c: c, stored: map[string]string{}, storedDuplicateSkipRules: map[string]bool{},
		storedRuleNames: map[string]bool{}}
	l := newLinter(cc, p)
	compiled, _ := c.compileWith(cc, p)
	return append(l.warnings(p), compiled.Warnings()...), cc.checkWork
}

// CompileAndLint is Compile(p, old) and, when p compiles, Lint(p), in one pass: every
// expression is type-checked once, and the messages Lint checks draw on what the expressions
// left of the one MaxPolicyCheckWork account. The admission webhook calls it: compiling and
// linting apart type-checked every expression twice, ~0.4 s of CPU each for the costliest
// 64 KiB admitted. Warnings are nil when p does not compile.
func (c *Compiler) CompileAndLint(p, old *v1alpha1.ClusterIPAMPolicy) (*Policy, field.ErrorList, []Warning) {
	cc := c.newCompilation(p, old, false)
	l := newLinter(cc, p)
	compiled, errs := c.compileWith(cc, p)
	if len(errs) > 0 {
		return nil, errs, nil
	}
	return compiled, nil, append(l.warnings(p), compiled.Warnings()...)
}

// linter collects a policy's warnings from the expressions a compilation checks.
type linter struct {
	cc *compilation
	// expressions are the absent-key warnings of the expressions checked so far.
	expressions []Warning
	// ruleEnv is the environment the skip rules compile in (nil until the compilation gets
	// there): the messages are checked in it.
	ruleEnv *environment.EnvSet
}

// newLinter hooks a linter of p into cc.
func newLinter(cc *compilation, p *v1alpha1.ClusterIPAMPolicy) *linter {
	l := &linter{cc: cc}
	ignore := p.Spec.FailurePolicy == v1alpha1.FailurePolicyIgnore
	cc.visit = func(path *field.Path, checked *cel.Ast) {
		if ignore {
			l.expressions = append(l.expressions, absentKeyWarnings(path, checked)...)
		}
		l.expressions = append(l.expressions, hostBitsWarnings(path, checked.NativeRep().Expr())...)
	}
	cc.visitRuleEnv = func(env *environment.EnvSet) { l.ruleEnv = env }
	return l
}

// warnings are the messages' warnings, then the expressions': the messages are checked after
// the expressions, with what they left of the account, so that the expressions' warnings do
// not depend on how many messages there are.
func (l *linter) warnings(p *v1alpha1.ClusterIPAMPolicy) []Warning {
	if l.ruleEnv == nil {
		return l.expressions
	}
	var messages []Warning
	for i, r := range p.Spec.SkipRules {
		if looksLikeCEL(l.cc.c.cost, l.ruleEnv, r.Message, &l.cc.checkWork) {
			messages = append(messages, Warning{field.NewPath("spec", "skipRules").Index(i).Child("message").String(),
				"looks like a CEL expression, but message is shown as typed: put it in messageExpression"})
		}
	}
	return append(messages, l.expressions...)
}

// looksLikeCEL: msg compiles in env to something other than a literal. Its checkWork is
// added to *work (the policy's account); a message whose check would take the account past
// MaxPolicyCheckWork is not checked and gets no warning: a message that costly to check is
// no CEL an author meant to write, and guessing from the parse alone would warn about every
// one-word message (`Attached` parses as an identifier).
func looksLikeCEL(cfg cost.Config, envSet *environment.EnvSet, msg string, work *uint64) bool {
	if msg == "" {
		return false
	}
	env, err := envSet.Env(environment.NewExpressions)
	if err != nil {
		return false
	}
	checked, spent, err := parseAndCheck(cfg, env, msg, cost.PolicyAllowance(*work))
	*work = addSaturating(*work, spent)
	return err == nil && checked.NativeRep().Expr().Kind() != ast.LiteralKind
}

// absentKeyWarnings warns about every map index (m['k'], m.k) in an expression that tests no
// key anywhere (has(), 'k' in m, m[?'k'], m.?k): it fails on a map without the key.
func absentKeyWarnings(path *field.Path, checked *cel.Ast) []Warning {
	root := ast.NavigateAST(checked.NativeRep())
	guarded := len(ast.MatchDescendants(root, func(e ast.NavigableExpr) bool {
		switch e.Kind() {
		case ast.SelectKind:
			return e.AsSelect().IsTestOnly()
		case ast.CallKind:
			f := e.AsCall().FunctionName()
			return f == operators.In || f == operators.OptIndex || f == operators.OptSelect
		}
		return false
	})) > 0
	if guarded {
		return nil
	}
	lookups := ast.MatchDescendants(root, func(e ast.NavigableExpr) bool {
		switch e.Kind() {
		case ast.SelectKind:
			return isMap(e.AsSelect().Operand(), checked)
		case ast.CallKind:
			c := e.AsCall()
			return c.FunctionName() == operators.Index && len(c.Args()) == 2 && isMap(c.Args()[0], checked)
		}
		return false
	})
	if len(lookups) == 0 {
		return nil
	}
	return []Warning{{path.String(), "indexes a map without testing for the key: it fails on an object without it, " +
		"and under failurePolicy Ignore the whole policy is then passed over; use has(m.k), 'k' in m, m[?'k'].orValue(…) or m.?k"}}
}

// hostBitsWarnings warns about every CIDR literal of e with host bits set (cidr('10.10.0.1/16'),
// x.containsCIDR('10.10.0.1/16')): the library keeps them, so it is not the network its author
// almost certainly meant — cidr('10.10.0.1/16') == cidr('10.10.0.0/16') is false. Each warning
// names the canonical form.
func hostBitsWarnings(path *field.Path, e ast.Expr) []Warning {
	var out []Warning
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if x.Kind() != ast.CallKind || len(x.AsCall().Args()) != 1 {
			return
		}
		call := x.AsCall()
		if call.FunctionName() != "cidr" && (call.FunctionName() != "containsCIDR" || !call.IsMemberFunction()) {
			return
		}
		lit := call.Args()[0]
		if lit.Kind() != ast.LiteralKind {
			return
		}
		s, ok := lit.AsLiteral().(types.String)
		if !ok {
			return
		}
		prefix, err := netip.ParsePrefix(string(s))
		if err != nil || prefix == prefix.Masked() {
			return
		}
		out = append(out, Warning{path.String(), fmt.Sprintf("the CIDR %q has host bits set: it is not the network %s "+
			"(cidr(%q) == cidr(%q) is false): write %q", string(s), prefix.Masked(), string(s), prefix.Masked().String(),
			prefix.Masked().String())})
	}))
	return out
}

// isMap: e is of a map type (an input's labels or annotations, a map a variable holds).
func isMap(e ast.Expr, checked *cel.Ast) bool {
	t := checked.NativeRep().GetType(e.ID())
	return t != nil && t.Kind() == types.MapKind
}

// ReplacedRules warns about every skip rule of p that has the name of a skip rule of
// another policy among others (which may include p itself, and to which the shipped default
// is added as the last layer when no policy named like it is there): the rule of the policy
// earlier in (priority, name) order replaces the other wherever both policies match. Each
// warning names both rules and both policies.
func ReplacedRules(p *v1alpha1.ClusterIPAMPolicy, others []v1alpha1.ClusterIPAMPolicy) []Warning {
	type layer struct {
		name     string
		priority int32
		last     bool
		rules    []v1alpha1.SkipRule
	}
	var layers []layer
	hasDefault := false
	for _, o := range others {
		hasDefault = hasDefault || o.Name == policies.BuiltinName
		if o.Name != p.Name {
			layers = append(layers, layer{o.Name, o.Spec.Priority, false, o.Spec.SkipRules})
		}
	}
	if b, err := policies.Builtin(); err == nil && !hasDefault && p.Name != policies.BuiltinName {
		layers = append(layers, layer{BuiltinPolicy, b.Spec.Priority, true, b.Spec.SkipRules})
	}
	before := func(a, b layer) bool {
		if a.last != b.last {
			return b.last
		}
		return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.name, b.name)) < 0
	}
	self := layer{p.Name, p.Spec.Priority, false, p.Spec.SkipRules}
	var out []Warning
	for i, r := range p.Spec.SkipRules {
		path := field.NewPath("spec", "skipRules").Index(i).Child("name").String()
		for _, l := range layers {
			if !slices.ContainsFunc(l.rules, func(o v1alpha1.SkipRule) bool { return o.Name == r.Name }) {
				continue
			}
			msg := fmt.Sprintf("rule %q of this policy (priority %d) replaces rule %q of policy %s (priority %d) wherever both match",
				r.Name, p.Spec.Priority, r.Name, l.name, l.priority)
			if before(l, self) {
				msg = fmt.Sprintf("rule %q of policy %s (priority %d) replaces rule %q of this policy (priority %d) wherever both match",
					r.Name, l.name, l.priority, r.Name, p.Spec.Priority)
			}
			out = append(out, Warning{path, msg})
		}
	}
	return out
}
