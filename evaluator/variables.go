package evaluator

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// variables is a policy's `variables` for one interface: a map whose values are evaluated on
// first use, at most once. It behaves as k8s.io/apiserver's lazy.MapValue, which it replaces
// in the hot path: that one built two maps and a closure per variable for every policy
// evaluated, and unescaped the field name with a regular expression on every access.
type variables struct {
	a *activation
	// values are the results by index in Policy.variables (an error too); nil until evaluated.
	// The views of one activation share it, so that each variable is evaluated once.
	values []ref.Val
	// visible is how many variables, in declaration order, this view shows: all of them to
	// the policy's other expressions, those before it to a variable's own expression — as
	// its type says (compileVariables), so that no variable can reach itself, not even
	// through `variables` used whole (iterated, or made a variable's value), which recursed
	// until the stack overflowed and killed the process.
	visible int
}

var (
	_ ref.Val       = (*variables)(nil)
	_ traits.Mapper = (*variables)(nil)
)

// variableIndex is where Find looks a field name up: by the names as declared, and by
// their unescaped form, as lazy.MapValue does (a name with escape sequences such as __dot__
// stands for the unescaped one).
type variableIndex struct {
	// byKey maps a declared name whose unescaped form is a variable to that variable.
	byKey map[string]int
	// byName maps a variable's declared name to its index.
	byName map[string]int
	// typ is the type of `variables`.
	typ *types.Type
}

// newVariableIndex indexes p's variables; typeName is the type of `variables`.
func newVariableIndex(vars []namedProgram, typeName string) variableIndex {
	x := variableIndex{byKey: map[string]int{}, byName: map[string]int{},
		typ: types.NewTypeValue(typeName, traits.IndexerType|traits.FieldTesterType|traits.IterableType)}
	for i, v := range vars {
		x.byName[v.name] = i
	}
	for _, v := range vars {
		if name, ok := apiservercel.Unescape(v.name); ok {
			if i, found := x.byName[name]; found {
				x.byKey[v.name] = i
			}
		}
	}
	return x
}

// resolve evaluates variable i unless it was, with the view of the variables before it.
func (v *variables) resolve(i int) ref.Val {
	if v.values[i] != nil {
		return v.values[i]
	}
	a := v.a
	// While it is evaluated, a re-entry finds an error, not another evaluation: the views
	// make one impossible; this keeps a future way round them from recursing without end.
	v.values[i] = types.NewErr("variable %s is evaluated in its own expression", a.p.variables[i].name)
	view := *a
	view.vars = variables{a: a, values: v.values, visible: i}
	val, _, err := a.r.evalCost(a.p, a.p.variables[i].program, &view)
	if err != nil {
		val = types.WrapErr(err)
	}
	v.values[i] = val
	return val
}

// evaluated are the indexes of the variables evaluated without an error, by name.
func (v *variables) evaluated() []int {
	var out []int
	for i, val := range v.values {
		if val != nil && !types.IsError(val) {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(i, j int) int { return cmp.Compare(v.a.p.variables[i].name, v.a.p.variables[j].name) })
	return out
}

// Find implements traits.Mapper.
func (v *variables) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(k), true
	}
	index := &v.a.p.variableIndex
	if i, found := index.byKey[string(k)]; found && i < v.visible {
		return v.resolve(i), true
	}
	name, ok := apiservercel.Unescape(string(k))
	if !ok {
		return nil, false
	}
	i, found := index.byName[name]
	if !found || i >= v.visible {
		return nil, false
	}
	return v.resolve(i), true
}

// Get implements traits.Indexer.
func (v *variables) Get(key ref.Val) ref.Val {
	if val, found := v.Find(key); found {
		return val
	}
	return types.ValOrErr(key, "no such key: %v", key)
}

// Contains implements traits.Container.
func (v *variables) Contains(key ref.Val) ref.Val {
	val, found := v.Find(key)
	if val != nil && types.IsUnknownOrError(val) {
		return val
	}
	return types.Bool(found)
}

// Size implements traits.Sizer: the number of variables the view shows.
func (v *variables) Size() ref.Val { return types.Int(v.visible) }

// Iterator implements traits.Iterable; as lazy.MapValue's, it yields the values, each as Get
// finds it by its declared name.
func (v *variables) Iterator() traits.Iterator { return &variablesIterator{vars: v} }

// ConvertToNative implements ref.Val: disallowed.
func (v *variables) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion from %q to %q", v.Type().TypeName(), typeDesc.Name())
}

// ConvertToType implements ref.Val: only to its own type and to type.
func (v *variables) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case v.Type():
		return v
	case types.TypeType:
		return v.a.p.variableIndex.typ
	}
	return types.NewErr("disallowed conversion from %q to %q", v.Type().TypeName(), typeVal.TypeName())
}

// Equal implements ref.Val: the same map only.
func (v *variables) Equal(other ref.Val) ref.Val {
	o, ok := other.(*variables)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(v == o)
}

// Type implements ref.Val.
func (v *variables) Type() ref.Type { return v.a.p.variableIndex.typ }

// Value implements ref.Val: not allowed.
func (v *variables) Value() any { return types.NoSuchOverloadErr() }

// variablesIterator iterates over the values of variables in declaration order.
type variablesIterator struct {
	vars  *variables
	index int
}

// ConvertToNative, ConvertToType, Equal, Type and Value implement ref.Val; HasNext and Next
// implement traits.Iterator.
func (i *variablesIterator) ConvertToNative(typeDesc reflect.Type) (any, error) {
	return nil, fmt.Errorf("disallowed conversion to %q", typeDesc.Name())
}

func (i *variablesIterator) ConvertToType(typeValue ref.Type) ref.Val {
	return types.NewErr("disallowed conversion to %q", typeValue.TypeName())
}

func (i *variablesIterator) Equal(other ref.Val) ref.Val {
	o, ok := other.(*variablesIterator)
	if !ok {
		return types.MaybeNoSuchOverloadErr(other)
	}
	return types.Bool(o == i)
}

func (i *variablesIterator) Type() ref.Type { return types.IteratorType }

func (i *variablesIterator) Value() any { return nil }

func (i *variablesIterator) HasNext() ref.Val { return types.Bool(i.index < i.vars.visible) }

func (i *variablesIterator) Next() ref.Val {
	v := i.vars.Get(types.String(i.vars.a.p.variables[i.index].name))
	i.index++
	return v
}
