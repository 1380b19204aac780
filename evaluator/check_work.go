package evaluator

import (
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/operators"
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
			var tried, params uint64
			if fn := funcs[name]; fn != nil {
				for _, o := range fn.OverloadDecls() {
					if o.IsMemberFunction() == call.IsMemberFunction() {
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
