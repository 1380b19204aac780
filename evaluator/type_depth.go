package evaluator

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// maxTypeDepth bounds how many list and map levels a value an expression builds may nest
// (list(list(…)) and map(string, list(…)) each count a level; optional() counts too). cel-go's
// checker formats and unifies whole types on every lookup, so checking grows with the depth
// of the types an expression builds, not only with its syntactic nesting (maxNestingDepth):
// 65 skip rules comparing two `holders.vms.map(x, [x])` chains of 12 `.map(x, [x, x])` steps
// took 1.3 s of CPU to compile (found by FuzzGeneratedPolicy; the webhook has 5 s and
// compiles each policy written). At this bound one such expression compiles in ~3 ms and a
// policy of 64 KiB of them (MaxPolicySourceBytes) in ~0.5 s, as one of ordinary expressions
// does; at depth 12 it was ~0.9 s, at depth 28 30 ms per expression. Real policies build a
// list of lists at most (a list of label pairs); every built-in policy and sample is within
// 2 levels.
const maxTypeDepth = 8

// typeDepthError refuses, before the checker runs, an expression that can build a value
// nesting more than maxTypeDepth list or map levels; "" when within. The depth is derived from
// the parsed (unchecked) expression by typeDepth: literals and comprehensions that wrap their
// element add a level, every other call keeps the deepest of its operands.
func typeDepthError(env *cel.Env, parsed *cel.Ast) string {
	d := typeDepthOf{env: env, scope: map[string]int{}}
	if n := d.depth(parsed.NativeRep().Expr()); n > maxTypeDepth {
		return fmt.Sprintf("the expression builds a value of %d nested list or map levels (a list of lists of …), "+
			"beyond the %d an expression may: type-checking one grows with the depth of its types", n, maxTypeDepth)
	}
	return ""
}

// typeDepthOf computes typeDepth with the comprehension variables in scope.
type typeDepthOf struct {
	env   *cel.Env
	scope map[string]int
}

// depth over-approximates the list and map levels e's value nests: an input or scalar 1 at
// (its Go type's levels: the inputs hold flat lists and maps), a variable its declared type's, a list or map
// literal one more than its deepest entry, a comprehension's iteration variable one less than
// its range, its accumulator the deepest its steps make it, optional.of() one more than its
// argument, any other call the deepest of its operands (at least 1: split(), lists.range()).
func (d typeDepthOf) depth(e ast.Expr) int {
	switch e.Kind() {
	case ast.LiteralKind:
		return 0
	case ast.IdentKind:
		if n, ok := d.scope[e.AsIdent()]; ok {
			return n
		}
		return inputDepth(e)
	case ast.SelectKind:
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "variables" {
			return d.variableDepth(sel.FieldName())
		}
		if _, scoped := d.scope[rootIdent(e)]; !scoped {
			return inputDepth(e)
		}
		return max(d.depth(sel.Operand()), 1)
	case ast.ListKind:
		n := 0
		for _, el := range e.AsList().Elements() {
			n = max(n, d.depth(el))
		}
		return n + 1
	case ast.MapKind:
		n := 0
		for _, entry := range e.AsMap().Entries() {
			n = max(n, d.depth(entry.AsMapEntry().Key()), d.depth(entry.AsMapEntry().Value()))
		}
		return n + 1
	case ast.StructKind:
		n := 0
		for _, f := range e.AsStruct().Fields() {
			n = max(n, d.depth(f.AsStructField().Value()))
		}
		return n + 1
	case ast.CallKind:
		return d.callDepth(e.AsCall())
	case ast.ComprehensionKind:
		return d.comprehensionDepth(e.AsComprehension())
	}
	return 0
}

func (d typeDepthOf) callDepth(call ast.CallExpr) int {
	n := 0
	if call.IsMemberFunction() {
		n = d.depth(call.Target())
	}
	for _, a := range call.Args() {
		n = max(n, d.depth(a))
	}
	switch call.FunctionName() {
	case "optional.of", "optional.ofNonZeroValue":
		return n + 1
	}
	return max(n, 1)
}

// comprehensionDepth binds the iteration variables one level below the range, and the
// accumulator to the deepest its initial value and two rounds of its step make it (a step
// that wraps the accumulator itself, which no macro writes, grows past any bound: two
// rounds show it growing).
func (d typeDepthOf) comprehensionDepth(c ast.ComprehensionExpr) int {
	elem := max(d.depth(c.IterRange())-1, 0)
	inner := d.with(c.IterVar(), elem)
	if c.HasIterVar2() {
		inner = inner.with(c.IterVar2(), elem)
	}
	acc := d.depth(c.AccuInit())
	for range 2 {
		withAcc := inner.with(c.AccuVar(), acc)
		acc = max(acc, withAcc.depth(c.LoopStep()), withAcc.depth(c.LoopCondition()))
	}
	return inner.with(c.AccuVar(), acc).depth(c.Result())
}

func (d typeDepthOf) with(name string, n int) typeDepthOf {
	scope := make(map[string]int, len(d.scope)+1)
	for k, v := range d.scope {
		scope[k] = v
	}
	scope[name] = n
	return typeDepthOf{env: d.env, scope: scope}
}

// rootIdent is the identifier a select chain starts from ("" when none).
func rootIdent(e ast.Expr) string {
	for e.Kind() == ast.SelectKind {
		e = e.AsSelect().Operand()
	}
	if e.Kind() == ast.IdentKind {
		return e.AsIdent()
	}
	return ""
}

// inputDepth is the levels of the input field e selects (vm.labels: 1, vm.name: 0), from
// its Go type; 1 for anything else (a field the checker will refuse, an unknown name).
func inputDepth(e ast.Expr) int {
	path, ok := selectPath(e)
	if !ok {
		return 1
	}
	steps := strings.Split(path, ".")
	t, _, _, ok := walkInput(inputVariables[steps[0]], steps[1:])
	if !ok {
		return 1
	}
	n := 0
	for t.Kind() == reflect.Map || t.Kind() == reflect.Slice {
		n, t = n+1, t.Elem()
	}
	return n
}

// variableDepth is the levels of variables.<name>'s declared type (1 when unknown).
func (d typeDepthOf) variableDepth(name string) int {
	if t, ok := d.env.CELTypeProvider().FindStructFieldType("vmipam.Variables", name); ok {
		return max(celTypeDepth(t.Type), 1)
	}
	return 1
}

// celTypeDepth is the list, map and optional levels t nests.
func celTypeDepth(t *types.Type) int {
	n := 0
	for _, p := range t.Parameters() {
		n = max(n, celTypeDepth(p))
	}
	switch t.Kind() {
	case types.ListKind, types.MapKind, types.OpaqueKind:
		return n + 1
	}
	return n
}
