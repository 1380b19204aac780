package evaluator

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Operations that walk a value deeply — equality, `in`, distinct(), flatten(), includes(),
// indexOf(), lastIndexOf(), sets.contains/equivalent/intersects — do work that grows with
// the value's deep size: every element of every nested list and map. A value can reuse one
// inner list ([x, x]), so k map(x, [x, x]) steps build 2^k elements for a cost of ~k, and
// CEL charges these operations by the top-level size only: `z == z` on such a value ran for
// seconds at a cost of a few hundred. Each of them is therefore
//
//   - checked before it runs: the deep size of every argument is counted by a walk that stops
//     past the per-call cost limit, and past it the call fails closed with an error naming
//     it (the walk is bounded by the limit, the operation never starts);
//   - charged after it ran by the deep size of its arguments (deepCostTrackers), when any
//     argument nests lists or maps (flat values are charged by the library already).
//
// So an operation's work is at most its charge plus one bounded walk.

// deepCall is one overload whose work grows with its arguments' deep size.
type deepCall struct {
	// function is the CEL name, overload the library's overload ID.
	function, overload string
}

// deepCalls are the deep overloads with a binding per overload (equality, which the
// interpreter plans itself, and `in`, bound once for all its overloads, are checked by
// deepOperatorDecorator).
var deepCalls = []deepCall{
	{"distinct", "list_distinct"},
	{"flatten", "list_flatten"},
	{"flatten", "list_flatten_int"},
	{"includes", "list_includes_dyn_dyn"},
	{"indexOf", "list_a_index_of_int"},
	{"lastIndexOf", "list_a_last_index_of_int"},
	{"sets.contains", "list_sets_contains_list"},
	{"sets.equivalent", "list_sets_equivalent_list"},
	{"sets.intersects", "list_sets_intersects_list"},
}

// deepSize counts the nodes of v — itself, and every element, key and value of the lists
// and maps it nests — and stops counting once the count passes limit (the result is then
// limit+1). Other values (scalars, input objects) count one.
func deepSize(v ref.Val, limit uint64) uint64 {
	n := uint64(0)
	var walk func(ref.Val)
	walk = func(v ref.Val) {
		if n > limit {
			return
		}
		n++
		switch c := v.(type) {
		case traits.Lister:
			size, _ := c.Size().(types.Int)
			for i := types.Int(0); i < size && n <= limit; i++ {
				walk(c.Get(i))
			}
		case traits.Mapper:
			for it := c.Iterator(); it.HasNext() == types.True && n <= limit; {
				k := it.Next()
				walk(k)
				walk(c.Get(k))
			}
		}
	}
	walk(v)
	return min(n, limit+1)
}

// nested reports whether v is a list or map holding a list or map.
func nested(v ref.Val) bool {
	switch c := v.(type) {
	case traits.Lister:
		size, _ := c.Size().(types.Int)
		for i := types.Int(0); i < size; i++ {
			switch c.Get(i).(type) {
			case traits.Lister, traits.Mapper:
				return true
			}
		}
	case traits.Mapper:
		for it := c.Iterator(); it.HasNext() == types.True; {
			switch c.Get(it.Next()).(type) {
			case traits.Lister, traits.Mapper:
				return true
			}
		}
	}
	return false
}

// deepArgsError is why a deep call must not run on args: an argument deeper than limit.
func deepArgsError(function string, args []ref.Val, limit uint64) ref.Val {
	for _, a := range args {
		if deepSize(a, limit) > limit {
			return types.WrapErr(fmt.Errorf("%s: an argument holds more than %d elements counting its nested lists and maps, "+
				"beyond what one call may walk within the per-call cost limit", function, limit))
		}
	}
	return nil
}

// deepCharge is the run-time charge of a deep call: the deep size of its arguments when
// one nests lists or maps, nil (the library's charge) otherwise.
func deepCharge(limit uint64) func(args []ref.Val, _ ref.Val) *uint64 {
	return func(args []ref.Val, _ ref.Val) *uint64 {
		deep := false
		for _, a := range args {
			deep = deep || nested(a)
		}
		if !deep {
			return nil
		}
		cost := uint64(0)
		for _, a := range args {
			cost = addSaturating(cost, deepSize(a, limit))
		}
		return &cost
	}
}

// deepCostTrackers charges every deep overload, equality included, by deepCharge.
func deepCostTrackers(limits Limits) cel.ProgramOption {
	var opts []interpreter.CostTrackerOption
	for _, id := range []string{overloads.Equals, overloads.NotEquals, overloads.InList} {
		opts = append(opts, interpreter.OverloadCostTracker(id, deepCharge(limits.PerCallCostLimit)))
	}
	for _, d := range deepCalls {
		opts = append(opts, interpreter.OverloadCostTracker(d.overload, deepCharge(limits.PerCallCostLimit)))
	}
	return cel.CostTrackerOptions(opts...)
}

// deepOverloads re-declares each deep overload with the deep-size check before the
// library's own binding, as guardedOverloads does.
func deepOverloads(limits Limits) ([]cel.EnvOption, error) {
	base, err := environment.MustBaseEnvSet(LanguageVersion).Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	var opts []cel.EnvOption
	var missing []string
	for _, d := range deepCalls {
		found, err := rebind(base, d.function, d.overload, func(orig *functions.Overload) cel.OverloadOpt {
			return deepBinding(d.function, orig, limits.PerCallCostLimit)
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			missing = append(missing, d.overload)
		}
		opts = append(opts, found...)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("deep overloads %v are not in the environment", missing)
	}
	return opts, nil
}

// deepBinding is orig's implementation behind the deep-size check.
func deepBinding(function string, orig *functions.Overload, limit uint64) cel.OverloadOpt {
	switch {
	case orig.Unary != nil:
		return cel.UnaryBinding(func(a ref.Val) ref.Val {
			if err := deepArgsError(function, []ref.Val{a}, limit); err != nil {
				return err
			}
			return orig.Unary(a)
		})
	case orig.Binary != nil:
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			if err := deepArgsError(function, []ref.Val{a, b}, limit); err != nil {
				return err
			}
			return orig.Binary(a, b)
		})
	}
	return cel.FunctionBinding(func(args ...ref.Val) ref.Val {
		if err := deepArgsError(function, args, limit); err != nil {
			return err
		}
		return orig.Function(args...)
	})
}

// deepOperatorDecorator puts the deep-size check before `==`, `!=` (which the interpreter
// plans itself rather than through a binding) and `in` (one binding for all overloads).
func deepOperatorDecorator(limits Limits) cel.ProgramOption {
	return cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		call, ok := i.(interpreter.InterpretableCall)
		if !ok || len(call.Args()) != 2 {
			return i, nil
		}
		switch call.Function() {
		case operators.Equals, operators.NotEquals, operators.In:
			return &checkedOperator{InterpretableCall: call, limit: limits.PerCallCostLimit}, nil
		}
		return i, nil
	})
}

// checkedOperator is `==`, `!=` or `in` (the interpreter's own call, whose Args, Function
// and OverloadID the cost tracker reads) evaluated with the deep-size check first.
type checkedOperator struct {
	interpreter.InterpretableCall
	limit uint64
}

// Exec evaluates both operands, as the interpreter does, checks their deep size and
// applies the operator.
func (c *checkedOperator) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	args := c.Args()
	l := args[0].Exec(frame)
	if types.IsError(l) {
		return l
	}
	r := args[1].Exec(frame)
	if types.IsError(r) {
		return r
	}
	var unk *types.Unknown
	unk, _ = types.MaybeMergeUnknowns(l, unk)
	unk, _ = types.MaybeMergeUnknowns(r, unk)
	if unk != nil {
		return unk
	}
	// `in` a map looks one key up: only `in` a list walks its elements.
	if _, isMap := r.(traits.Mapper); c.Function() != operators.In || !isMap {
		if err := deepArgsError(c.Function(), []ref.Val{l, r}, c.limit); err != nil {
			return err
		}
	}
	switch c.Function() {
	case operators.In:
		if container, ok := r.(traits.Container); ok {
			return container.Contains(l)
		}
		return types.NoSuchOverloadErr()
	case operators.NotEquals:
		return types.Bool(types.Equal(l, r) != types.True)
	}
	return types.Equal(l, r)
}

// Eval implements interpreter.Interpretable.
func (c *checkedOperator) Eval(ctx interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(ctx))
}
