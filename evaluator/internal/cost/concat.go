package cost

import (
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// List concatenation: cel-go's `a + b` on lists builds a lazy chain (common/types/list.go,
// concatList) charged 1, and every later read walks the chain, so that equality or iteration
// over a list built across many variables walked a link per variable for each element. `+`
// of two lists builds a flat list of their elements instead (flatAdd), charged a unit per
// concatListUnit elements copied (resultCharges).

// concatListUnit is how many elements one unit of a concatenation pays to copy.
const concatListUnit = 10

// flatAdd is `+` (the interpreter's own call, whose Args, Function and OverloadID the cost
// tracker reads) with a list result flattened: `_+_` has one binding for all its overloads,
// so the flattening wraps the planned call. A comprehension's accumulator (a mutable list
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
	vals := make([]ref.Val, 0, int(listSize(v)))
	for it := l.Iterator(); it.HasNext() == types.True; {
		vals = append(vals, it.Next())
	}
	return types.NewRefValList(types.DefaultTypeAdapter, vals)
}

// resultCharges charge the calls whose result the libraries do not charge by its size:
// list `+` (flatAdd's copy), and format() (charged by its format string, not by what it
// renders: ten characters a unit, as a traversal).
var resultCharges = cel.CostTrackerOptions(
	interpreter.OverloadCostTracker(overloads.AddList, func(args []ref.Val, _ ref.Val) *uint64 {
		if _, accumulator := args[0].(traits.MutableLister); accumulator {
			return nil // appended in place: cel-go's unit stands
		}
		cost := 1 + (listSize(args[0])+listSize(args[1])+concatListUnit-1)/concatListUnit
		return &cost
	}),
	interpreter.OverloadCostTracker("string_format", func(_ []ref.Val, result ref.Val) *uint64 {
		cost := uint64(1)
		if s, ok := result.Value().(string); ok {
			cost += uint64(math.Ceil(float64(len(s)) * 0.1))
		}
		return &cost
	}),
)
