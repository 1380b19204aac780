package evaluator

import (
	"fmt"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"github.com/google/cel-go/parser"
)

// List concatenation. cel-go's `a + b` on lists builds a lazy chain (common/types/list.go,
// concatList) for 1 unit: every later Get walks the chain, so a list built by 31 variables
// each adding a few elements to the one before compared with itself walked ~1,000 links per
// element — ~0.2 s for ~100 units (issue #15, tester atk6). `+` of two lists here builds a flat
// list of their elements, charged one unit per concatListUnit elements (at compile and run
// time alike), so that no chain deeper than one exists to walk.

// concatListUnit is how many elements one unit of a concatenation pays to copy (a pointer
// each: ~1 ns; a tenth of a unit is ~30 ns).
const concatListUnit = 10

// concatCost is the charge of concatenating lists of n elements in all.
func concatCost(n uint64) uint64 { return 1 + (n+concatListUnit-1)/concatListUnit }

// flatAdd is list `+` (the interpreter's own call, whose Args, Function and OverloadID the
// cost tracker reads) with its result flattened: `_+_` has one binding for all its overloads
// (cel-go's stdlib: a singleton, traits.Adder), so the flattening wraps the planned call
// (deepOperatorDecorator). A comprehension's accumulator (`@result + [x]`, a mutable list
// appended in place) and anything not a list pass through.
type flatAdd struct {
	interpreter.InterpretableCall
}

// Exec implements interpreter.InterpretableV2.
func (f *flatAdd) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	return flatten(f.InterpretableCall.Exec(frame))
}

// Eval implements interpreter.Interpretable.
func (f *flatAdd) Eval(act interpreter.Activation) ref.Val {
	return flatten(f.InterpretableCall.Eval(act))
}

// flatten is v, a list, as a flat list of its elements; v itself when it is no list or a
// comprehension's mutable accumulator.
func flatten(v ref.Val) ref.Val {
	l, ok := v.(traits.Lister)
	if !ok {
		return v
	}
	if _, accumulator := v.(traits.MutableLister); accumulator {
		return v
	}
	n := int(listSize(v))
	vals := make([]ref.Val, 0, n)
	for it := l.Iterator(); it.HasNext() == types.True; {
		vals = append(vals, it.Next())
	}
	return types.NewRefValList(types.DefaultTypeAdapter, vals)
}

// concatListCost is the run-time charge of `+` on two lists (false for other operands).
func concatListCost(args []ref.Val) (uint64, bool) {
	if len(args) != 2 {
		return 0, false
	}
	if _, ok := args[0].(traits.Lister); !ok {
		return 0, false
	}
	if _, accumulator := args[0].(traits.MutableLister); accumulator {
		return 0, false // appended in place: cel-go's unit stands
	}
	if _, ok := args[1].(traits.Lister); !ok {
		return 0, false
	}
	return concatCost(listSize(args[0]) + listSize(args[1])), true
}

// concatCharge adds to the estimate what `a + b` on lists is charged beyond cel-go's unit
// (concatListCost): the copy of their elements, by their derived bounds, times iterations;
// a concatenation whose operands have no derived size is recorded as unbounded. cel-go's
// checker estimates list `+` at 1 and computes its result's and elements' sizes, which a
// custom estimate would lose; so the copy is added here, as the deep operations are.
func (w *deepWalk) concatCharge(env boundEnv, e ast.Expr, iterations uint64) {
	call := e.AsCall()
	args := call.Args()
	if call.FunctionName() != operators.Add || len(args) != 2 {
		return
	}
	if accumulator(args[0]) {
		w.builtList(env, e, args[1])
		return
	}
	if t := w.a.GetType(args[0].ID()); t == nil || t.Kind() != types.ListKind {
		return
	}
	var n uint64
	for _, a := range args {
		b, ok := deriveBound(env, a)
		if !ok {
			w.unbounded = append(w.unbounded, fmt.Sprintf("+ at %s: %s has no size the estimate can derive, and + "+
				"copies the elements of the lists it concatenates", w.position(e), describe(w.a, unsizedPart(env, a))))
			return
		}
		n = addSaturating(n, b.size)
	}
	w.total = addSaturating(w.total, saturatingMul(iterations, concatCost(n)-1))
}

// builtList checks what a macro's own accumulation (`@result + [x]` at e, appended in place:
// nothing beyond cel-go's unit to charge) adds to the list it builds: the list holds every
// element, so one whose size the estimate cannot derive (a transformMap() result) is refused
// in a new expression, naming that element. Before, accumulator() knew only "__result__", not
// cel-go's "@result", and the refusal blamed "+ of the operand at 1:21", a + the user never
// wrote.
func (w *deepWalk) builtList(env boundEnv, e, added ast.Expr) {
	if _, ok := deriveBound(env, added); ok {
		return
	}
	w.unbounded = append(w.unbounded, fmt.Sprintf("the list the comprehension at %s builds: %s has no size the estimate "+
		"can derive, and the list holds every such value", w.position(e), describe(w.a, unsizedPart(env, added))))
}

// describe is e's source (unparsed, at most 80 characters), else operandName's; a
// comprehension (which does not unparse) by its position.
func describe(a *ast.AST, e ast.Expr) string {
	if e.Kind() == ast.ComprehensionKind {
		loc := a.SourceInfo().GetStartLocation(e.ID())
		return fmt.Sprintf("the value the comprehension at %d:%d builds", loc.Line(), loc.Column()+1)
	}
	if src, err := parser.Unparse(e, a.SourceInfo()); err == nil {
		return cut(src, 80)
	}
	return operandName(a, e)
}

// unsizedPart is the part of e whose bound deriveBound cannot derive: the first such element
// of a list literal, at any depth, else e itself; the refusal names it rather than a list
// the user may not have written whole.
func unsizedPart(env boundEnv, e ast.Expr) ast.Expr {
	if e.Kind() != ast.ListKind {
		return e
	}
	for _, el := range e.AsList().Elements() {
		if _, ok := deriveBound(env, el); !ok {
			return unsizedPart(env, el)
		}
	}
	return e
}

// position is where e starts in the source, as line:column.
func (w *deepWalk) position(e ast.Expr) string {
	loc := w.a.SourceInfo().GetStartLocation(e.ID())
	return fmt.Sprintf("%d:%d", loc.Line(), loc.Column()+1)
}

// accumulator: e is a comprehension's accumulator variable (the macros' "@result", or
// "__result__" in older expansions), which cel-go makes a mutable list it appends to.
func accumulator(e ast.Expr) bool {
	return e.Kind() == ast.IdentKind && (e.AsIdent() == parser.HiddenAccumulatorName || e.AsIdent() == parser.AccumulatorName)
}
