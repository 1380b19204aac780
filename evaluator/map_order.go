package evaluator

import (
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
)

// Determinism of maps an expression builds. The input's maps iterate in key order
// (ordered.go), but a map literal, a transformMap result or a parsed URL's query is a Go
// map, which cel-go iterates in Go's random order: `variables.allowed.map(k, k).join(', ')`
// would give a different message on every run, `m.exists(k, …)` would stop at a different
// key (a different cost), and `m.map(k, k)[0]` give a different decision. Order
// shows only where a map is iterated, and CEL iterates only in comprehensions (formatting
// and the trace sort the entries themselves), so every comprehension whose range may be a
// map iterates it in key order: the range's planned node is wrapped.

// orderedRanges is the program option for checked: every comprehension range of checked is
// held to the comprehension range bound (cost.Config.RangeError), and one whose type is a
// map, or may be one (dyn, a type parameter), yields a map iterating in key order.
func orderedRanges(checked *cel.Ast, cfg cost.Config) cel.ProgramOption {
	a := checked.NativeRep()
	ranges := map[int64]bool{} // true: the range may be a map
	ast.PostOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.ComprehensionKind {
			return
		}
		r := e.AsComprehension().IterRange()
		switch a.GetType(r.ID()).Kind() {
		case types.MapKind, types.DynKind, types.AnyKind, types.TypeParamKind:
			ranges[r.ID()] = true
		default:
			ranges[r.ID()] = false
		}
	}))
	return cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		mayBeMap, ok := ranges[i.ID()]
		if !ok {
			return i, nil
		}
		f := func(v ref.Val) ref.Val {
			if err := cfg.RangeError(v); err != nil {
				return err
			}
			if mayBeMap {
				return inKeyOrder(v)
			}
			return v
		}
		// The wrapper keeps the node's kind: cel-go's cost tracker charges a node by it.
		switch n := i.(type) {
		case interpreter.InterpretableAttribute:
			return &rangeAttribute{n, f}, nil
		case interpreter.InterpretableCall:
			return &rangeCall{n, f}, nil
		case interpreter.InterpretableConstructor:
			return &rangeConstructor{n, f}, nil
		}
		return &rangeNode{i, f}, nil
	})
}

// inKeyOrder is v, when it is a map that does not iterate in key order already, as one that
// does; v otherwise.
func inKeyOrder(v ref.Val) ref.Val {
	switch m := v.(type) {
	case orderedMap, sortedMap:
		return v
	case traits.Mapper:
		return sortedMap{m}
	}
	return v
}

// sortedMap is a map that iterates in key order: keys of one type by their value, keys of
// different types (a dyn map) by their type's name first.
type sortedMap struct {
	traits.Mapper
}

// Iterator implements traits.Iterable: the keys, sorted. The map's size is bounded by the
// comprehension range bound (Limits.ComprehensionRange), and its iteration is charged per
// element; sorting adds ~log2(n) comparisons of ~20 ns an element.
func (m sortedMap) Iterator() traits.Iterator {
	var keys []ref.Val
	for it := m.Mapper.Iterator(); it.HasNext() == types.True; {
		keys = append(keys, it.Next())
	}
	slices.SortFunc(keys, compareKeys)
	return types.NewRefValList(types.DefaultTypeAdapter, keys).(traits.Lister).Iterator()
}

// compareKeys orders two map keys: by their type's name, then by value.
func compareKeys(a, b ref.Val) int {
	if c := strings.Compare(a.Type().TypeName(), b.Type().TypeName()); c != 0 {
		return c
	}
	if cmp, ok := a.(traits.Comparer); ok {
		if r, ok := cmp.Compare(b).(types.Int); ok {
			return int(r)
		}
	}
	if a.Equal(b) == types.True {
		return 0
	}
	if a == types.False { // bool keys: false first
		return -1
	}
	return 1
}

// rangeAttribute, rangeCall, rangeConstructor and rangeNode are a comprehension range's
// planned node of each kind, its value passed through f.
type (
	rangeAttribute struct {
		interpreter.InterpretableAttribute
		f func(ref.Val) ref.Val
	}
	rangeCall struct {
		interpreter.InterpretableCall
		f func(ref.Val) ref.Val
	}
	rangeConstructor struct {
		interpreter.InterpretableConstructor
		f func(ref.Val) ref.Val
	}
	rangeNode struct {
		interpreter.InterpretableV2
		f func(ref.Val) ref.Val
	}
)

// Exec implements interpreter.InterpretableV2.
func (o *rangeAttribute) Exec(fr *interpreter.ExecutionFrame) ref.Val {
	return o.f(o.InterpretableAttribute.Exec(fr))
}

// Eval implements interpreter.Interpretable.
func (o *rangeAttribute) Eval(act interpreter.Activation) ref.Val {
	return o.f(o.InterpretableAttribute.Eval(act))
}

// Exec implements interpreter.InterpretableV2.
func (o *rangeCall) Exec(fr *interpreter.ExecutionFrame) ref.Val {
	return o.f(o.InterpretableCall.Exec(fr))
}

// Eval implements interpreter.Interpretable.
func (o *rangeCall) Eval(act interpreter.Activation) ref.Val {
	return o.f(o.InterpretableCall.Eval(act))
}

// Exec implements interpreter.InterpretableV2.
func (o *rangeConstructor) Exec(fr *interpreter.ExecutionFrame) ref.Val {
	return o.f(o.InterpretableConstructor.Exec(fr))
}

// Eval implements interpreter.Interpretable.
func (o *rangeConstructor) Eval(act interpreter.Activation) ref.Val {
	return o.f(o.InterpretableConstructor.Eval(act))
}

// Exec implements interpreter.InterpretableV2.
func (o *rangeNode) Exec(fr *interpreter.ExecutionFrame) ref.Val {
	return o.f(o.InterpretableV2.Exec(fr))
}

// Eval implements interpreter.Interpretable.
func (o *rangeNode) Eval(act interpreter.Activation) ref.Val { return o.f(o.InterpretableV2.Eval(act)) }
