package evaluator

import (
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/operators"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// MaxPolicyCheckWork bounds checkWork summed over a policy's expressions: the type checker's
// work, in type bindings copied. cel-go's checker copies its whole substitution mapping for
// every overload it tries and every list or map element it joins, and the mapping gains an
// entry for every type parameter of a generic overload it instantiates (==, [], in, dyn(),
// +, …) and for every list or map literal: its work grows with the square of an expression's
// generic operations. 64 KiB of `dyn(1)+dyn(2)==dyn(3) || …` chains took 2.5–3 s of CPU to
// check (issue #15), one run past the webhook's 5 s; with the bound the worst 64 KiB compiles
// or is refused in ≤ ~0.4 s of CPU (BenchmarkCompileWorstCase, two loaded cores), while the
// built-in default policy spends ~3,600 and one 5,120-character OR chain of map lookups
// ~600,000.
const MaxPolicyCheckWork = 1_000_000

// tryCost is what trying one overload or joining one element costs the checker beyond
// copying the mapping, in bindings copied: allocating the copy, substituting and unifying the
// types (~1.3 µs against ~0.15 µs per binding copied, on two loaded cores).
const tryCost = 8

// checkWork estimates what type-checking e costs the checker, in type bindings copied (an
// upper bound: it counts every overload of a function as tried and instantiated). It walks e
// once, in the checker's order (operands before the call), so it is linear in e's size.
func checkWork(funcs map[string]*decls.FunctionDecl, e ast.Expr) uint64 {
	var work, bindings uint64
	copies := func(n, added uint64) {
		work = addSaturating(work, n*(bindings+tryCost))
		bindings += added
	}
	ast.PostOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.CallKind:
			call := e.AsCall()
			name := call.FunctionName()
			if name == operators.LogicalAnd || name == operators.LogicalOr {
				copies(uint64(len(call.Args())), 0)
				return
			}
			member := call.IsMemberFunction()
			if q, ok := qualifiedName(call); ok && funcs[q] != nil {
				name, member = q, false
			}
			var tried, params uint64
			if fn := funcs[name]; fn != nil {
				for _, o := range fn.OverloadDecls() {
					if o.IsMemberFunction() == member {
						tried++
						params += uint64(len(o.TypeParams()))
					}
				}
			}
			copies(tried, params)
		case ast.ListKind:
			copies(uint64(len(e.AsList().Elements())), 1)
		case ast.MapKind:
			copies(2*uint64(len(e.AsMap().Entries())), 2)
		case ast.ComprehensionKind:
			copies(3, 1)
		}
	}))
	return work
}

// qualifiedName is the name of a namespaced function called as call, such as optional.of or
// sets.contains: the parser reads `optional.of(1)` as a member call of `of` on the identifier
// `optional`, and the checker resolves it to the function "optional.of". Before, checkWork
// found no function "of", counted nothing for it, and 64 KiB of optional.of(1).hasValue()
// chains were admitted at ~50,000 units a rule for ~35 ms of CPU each.
func qualifiedName(call ast.CallExpr) (string, bool) {
	if !call.IsMemberFunction() {
		return "", false
	}
	prefix, ok := identPath(call.Target())
	return prefix + "." + call.FunctionName(), ok
}

// identPath is the dotted name of an identifier or a chain of field selections on one
// (a.b.c), false for anything else.
func identPath(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), true
	case ast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", false
		}
		prefix, ok := identPath(s.Operand())
		return prefix + "." + s.FieldName(), ok
	}
	return "", false
}

// checkAllowance is what an expression may spend of checkWork: left of total, the bound on
// what of (a phrase: "a policy's expressions") may spend together; advice says how to stay
// within it.
type checkAllowance struct {
	left, total uint64
	of, advice  string
}

// policyAllowance is what is left of MaxPolicyCheckWork once spent is spent.
func policyAllowance(spent uint64) checkAllowance {
	return checkAllowance{left: MaxPolicyCheckWork - min(spent, MaxPolicyCheckWork), total: MaxPolicyCheckWork,
		of: "a policy's expressions", advice: "split long expressions into variables, or the policy into several"}
}

// CheckWorkAllowance is type-checking work (checkWork, in type bindings copied) that several
// compilations draw on together, beside each policy's own MaxPolicyCheckWork: the dry run
// compiles the candidate policies of one request within one, so that what a request costs to
// compile is bounded as a policy's is, not by how many policies it carries. It is not safe
// for concurrent use.
type CheckWorkAllowance struct {
	left, total uint64
	of          string
}

// NewCheckWorkAllowance is an allowance of total units of check work for what of names (a
// phrase, quoted when an expression is refused: "the candidate policies of a request").
func NewCheckWorkAllowance(total uint64, of string) *CheckWorkAllowance {
	return &CheckWorkAllowance{left: total, total: total, of: of}
}

// Spent is the check work the compilations within a have spent so far.
func (a *CheckWorkAllowance) Spent() uint64 { return a.total - a.left }

// CompileWithin is Compile drawing the type checker's work from shared too: an expression
// whose work exceeds what is left of its policy's MaxPolicyCheckWork or of shared is refused
// before it is checked (with the bound it would cross), and what the policy spends is taken
// from shared. With a nil shared it is Compile.
func (c *Compiler) CompileWithin(p, old *v1alpha1.ClusterIPAMPolicy, shared *CheckWorkAllowance) (*Policy, field.ErrorList) {
	cc := c.newCompilation(p, old, false)
	cc.shared = shared
	return c.compileWith(cc, p)
}

// checkAllowance is what the next expression of cc may spend: the least of what is left of
// the policy's MaxPolicyCheckWork and of the allowance it shares.
func (cc *compilation) checkAllowance() checkAllowance {
	own := policyAllowance(cc.checkWork)
	if cc.shared == nil || cc.shared.left >= own.left {
		return own
	}
	return checkAllowance{left: cc.shared.left, total: cc.shared.total, of: cc.shared.of,
		advice: "split long expressions into variables, or send fewer or smaller policies"}
}

// spendCheckWork adds work to the policy's account and takes it from the shared allowance.
func (cc *compilation) spendCheckWork(work uint64) {
	cc.checkWork = addSaturating(cc.checkWork, work)
	if cc.shared != nil {
		cc.shared.left -= min(work, cc.shared.left)
	}
}
