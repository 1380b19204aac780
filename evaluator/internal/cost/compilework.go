package cost

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// Compiling is bounded too: the parser's nesting (MaxNestingDepth, an environment option),
// the depth of the types an expression builds (MaxTypeDepth) and the type checker's work
// (CheckWork, MaxPolicyCheckWork per policy) are checked on the parsed expression, before the
// checker runs; a policy's source is bounded by MaxPolicySourceBytes before anything is
// parsed.

// MaxNestingDepth bounds how deeply an expression may nest (brackets, calls, operands,
// ternaries: cel-go's parser recursion). cel-go's checker formats the whole type of an
// expression on every type lookup, so checking grows with the cube of the nesting: a
// 486-character `[[[…1…]]] != []` of depth 240 takes 8.6 s to compile.
const MaxNestingDepth = 32

// MaxPolicySourceBytes bounds the bytes of CEL source one policy's expressions hold together:
// the CRD bounds each expression and each list, but not their product.
const MaxPolicySourceBytes = 64 << 10

// Precheck refuses, before cel-go's checker runs on the parsed expression, what must not be
// checked: a regex pattern that is not a literal or whose program is beyond the bounds (the
// checker's validator compiles literal patterns), a value of types nested deeper than
// MaxTypeDepth, and check work beyond allowance. work is the CheckWork to spend (0 when
// refused before it was counted).
func (c Config) Precheck(env *cel.Env, parsed *cel.Ast, allowance Allowance) (work uint64, err error) {
	if errs := RegexErrors(parsed.NativeRep().Expr()); len(errs) > 0 {
		return 0, errors.New(strings.Join(errs, "; "))
	}
	if msg := c.typeDepthError(env, parsed); msg != "" {
		return 0, errors.New(msg)
	}
	if work = CheckWork(env.Functions(), parsed.NativeRep().Expr()); work > allowance.Left {
		return 0, fmt.Errorf("type-checking the expression would copy ~%d type bindings, beyond the %d left of the %d "+
			"%s may spend together (the work grows with the square of an expression's operations, "+
			"generic ones such as ==, [], in, dyn() and literal lists and maps most): %s",
			work, allowance.Left, allowance.Total, allowance.Of, allowance.Advice)
	}
	return work, nil
}

// NestingError is the error of src, refused by the parser for nesting past MaxNestingDepth: a
// long chain of an arithmetic operator, which the parser nests one level an operator, is
// named as such.
func NestingError(src string) error {
	if op, n := longestOperatorChain(src); n >= MaxNestingDepth/2 {
		return fmt.Errorf("the expression nests more than %d levels deep, the most an expression may "+
			"(checking one grows with the cube of its nesting): it holds a chain of %d `%s` operators, and each "+
			"is a level; split the chain into variables, or build a string with join() or format()",
			MaxNestingDepth, n, op)
	}
	return fmt.Errorf("the expression nests more than %d levels deep (brackets, calls, operands), "+
		"the most an expression may: checking one grows with the cube of its nesting", MaxNestingDepth)
}

// MaxTypeDepth bounds how many list and map levels a value an expression builds may nest
// (list(list(…)) and map(string, list(…)) each count a level; optional() counts too). cel-go's
// checker formats and unifies whole types on every lookup, so checking grows with the depth
// of the types an expression builds, not only with its syntactic nesting (MaxNestingDepth):
// 65 skip rules comparing two `holders.vms.map(x, [x])` chains of 12 `.map(x, [x, x])` steps
// take 1.3 s of CPU to compile unbounded (the webhook has 5 s and
// compiles each policy written). At this bound one such expression compiles in ~3 ms and a
// policy of 64 KiB of them (MaxPolicySourceBytes) in ~0.5 s, as one of ordinary expressions
// does; at depth 12 it was ~0.9 s, at depth 28 30 ms per expression. Real policies build a
// list of lists at most (a list of label pairs); every built-in policy and sample is within
// 2 levels.
const MaxTypeDepth = 8

// typeDepthError refuses, before the checker runs, an expression that can build a value
// nesting more than MaxTypeDepth list or map levels; "" when within. The depth is derived from
// the parsed (unchecked) expression by typeDepth: literals and comprehensions that wrap their
// element add a level, every other call keeps the deepest of its operands.
func (c Config) typeDepthError(env *cel.Env, parsed *cel.Ast) string {
	d := typeDepthOf{c: c, env: env, scope: map[string]int{}}
	if n := d.depth(parsed.NativeRep().Expr()); n > MaxTypeDepth {
		return fmt.Sprintf("the expression builds a value of %d nested list or map levels (a list of lists of …), "+
			"beyond the %d an expression may: type-checking one grows with the depth of its types", n, MaxTypeDepth)
	}
	return ""
}

// typeDepthOf computes typeDepth with the comprehension variables in scope.
type typeDepthOf struct {
	c     Config
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
		return d.c.inputDepth(e)
	case ast.SelectKind:
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "variables" {
			return d.variableDepth(sel.FieldName())
		}
		if _, scoped := d.scope[rootIdent(e)]; !scoped {
			return d.c.inputDepth(e)
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
	return typeDepthOf{c: d.c, env: d.env, scope: scope}
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
func (c Config) inputDepth(e ast.Expr) int {
	path, ok := c.selectPath(e)
	if !ok {
		return 1
	}
	steps := strings.Split(path, ".")
	t, _, ok := c.walkInput(steps)
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
	if t, ok := d.env.CELTypeProvider().FindStructFieldType(d.c.Variables, name); ok {
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

// MaxPolicyCheckWork bounds checkWork summed over a policy's expressions: the type checker's
// work, in type bindings copied. cel-go's checker copies its whole substitution mapping for
// every overload it tries and every list or map element it joins, and the mapping gains an
// entry for every type parameter of a generic overload it instantiates (==, [], in, dyn(),
// +, …) and for every list or map literal: its work grows with the square of an expression's
// generic operations. 64 KiB of `dyn(1)+dyn(2)==dyn(3) || …` chains take 2.5–3 s of CPU to
// check unbounded, near the webhook's 5 s; with the bound the worst 64 KiB compiles
// or is refused in ≤ ~0.4 s of CPU (BenchmarkCompileWorstCase, two loaded cores), while the
// built-in default policy spends ~3,600 and one 5,120-character OR chain of map lookups
// ~600,000.
const MaxPolicyCheckWork = 1_000_000

// tryCost is what trying one overload or joining one element costs the checker beyond
// copying the mapping, in bindings copied: allocating the copy, substituting and unifying the
// types (~1.3 µs against ~0.15 µs per binding copied, on two loaded cores).
const tryCost = 8

// CheckWork estimates what type-checking e costs the checker, in type bindings copied (an
// upper bound: it counts every overload of a function as tried and instantiated). It walks e
// once, in the checker's order (operands before the call), so it is linear in e's size.
func CheckWork(funcs map[string]*decls.FunctionDecl, e ast.Expr) uint64 {
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
// `optional`, and the checker resolves it to the function "optional.of", which checkWork
// must count (64 KiB of optional.of(1).hasValue() chains are ~35 ms of CPU each to check).
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

// Allowance is what an expression may spend of CheckWork: Left of Total, the bound on what Of
// (a phrase: "a policy's expressions") may spend together; Advice says how to stay within it.
type Allowance struct {
	Left, Total uint64
	Of, Advice  string
}

// PolicyAllowance is what is left of MaxPolicyCheckWork once spent is spent.
func PolicyAllowance(spent uint64) Allowance {
	return Allowance{Left: MaxPolicyCheckWork - min(spent, MaxPolicyCheckWork), Total: MaxPolicyCheckWork,
		Of: "a policy's expressions", Advice: "split long expressions into variables, or the policy into several"}
}

// longestOperatorChain is the arithmetic operator (+ - * / %) with the longest chain in src
// at one bracket level, and its length. cel-go's parser balances chains of || and && but
// nests every other binary operator left to right, one level an operator: a refusal of a
// long chain `'a' + 'b' + …` for its nesting names the chain, not brackets it does not have.
// String literals are skipped; a '-' after an operator or bracket is a sign, not counted.
func longestOperatorChain(src string) (string, int) {
	type level struct{ counts map[byte]int }
	stack := []level{{counts: map[byte]int{}}}
	bestOp, best := "", 0
	operand := false // the previous token ends an operand: a following '-' is binary
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			if strings.HasPrefix(src[i:], strings.Repeat(string(c), 3)) {
				end := strings.Index(src[i+3:], strings.Repeat(string(c), 3))
				if end < 0 {
					return bestOp, best
				}
				i, operand = i+3+end+2, true
				continue
			}
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			i, operand = j, true
		case c == '(' || c == '[' || c == '{':
			stack, operand = append(stack, level{counts: map[byte]int{}}), false
		case c == ')' || c == ']' || c == '}':
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			operand = true
		case strings.IndexByte("+-*/%", c) >= 0 && (c != '-' || operand):
			counts := stack[len(stack)-1].counts
			counts[c]++
			if counts[c] > best {
				bestOp, best = string(c), counts[c]
			}
			operand = false
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == '=' || c == '!' || c == '<' || c == '>' || c == '&' || c == '|' || c == '?' || c == ':' || c == ',':
			operand = false
			if c == ',' || c == '?' || c == ':' || c == '&' || c == '|' {
				// a new operand list or branch starts a new chain at this level
				stack[len(stack)-1].counts = map[byte]int{}
			}
		default:
			operand = true
		}
	}
	return bestOp, best
}
