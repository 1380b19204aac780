package evaluator

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Determinism: cel-go iterates a Go map in Go's random map order, so an expression such as
// vm.labels.map(k, k + '=' + vm.labels[k]).join(',') could give a different string, and a
// different decision, on every call. The environment therefore presents the input's maps
// (labels, annotations) as orderedMaps, which iterate in key order. Maps an expression builds
// itself (literals, comprehension results) are iterated in key order by the comprehensions
// over them (map_order.go).

// orderedTypes is the environment's type provider and adapter: the native-types registry,
// except that map[string]string values become orderedMaps. It is both, so that environments
// extended later (the policy's `variables`) adapt values through it too.
type orderedTypes struct {
	types.Provider
	base types.Adapter
}

// orderedMaps is the cel.EnvOption installing orderedTypes over the environment's current
// provider and adapter; it must come after ext.NativeTypes.
func orderedMaps(e *cel.Env) (*cel.Env, error) {
	o := orderedTypes{Provider: e.CELTypeProvider(), base: e.CELTypeAdapter()}
	e, err := cel.CustomTypeProvider(o)(e)
	if err != nil {
		return nil, err
	}
	return cel.CustomTypeAdapter(o)(e)
}

// NativeToValue implements types.Adapter.
func (o orderedTypes) NativeToValue(v any) ref.Val {
	if m, ok := v.(map[string]string); ok {
		return orderedMap{Mapper: types.NewStringStringMap(o, m), keys: m}
	}
	return o.base.NativeToValue(v)
}

// orderedMap is a string map that iterates in key order.
type orderedMap struct {
	traits.Mapper
	keys map[string]string
}

// Iterator implements traits.Iterable, in key order.
func (m orderedMap) Iterator() traits.Iterator {
	keys := slices.Sorted(maps.Keys(m.keys))
	return types.NewStringList(types.DefaultTypeAdapter, keys).(traits.Lister).Iterator()
}

// Field access: cel-go's native-type registry reads a field with reflect.Value.Interface,
// which copies a string, bool or integer to the heap before CEL boxes it again as a value —
// two allocations for every field an expression reads. orderedTypes reads those fields as
// CEL values directly (one, or none for a bool); other fields (maps, lists, nested structs,
// timestamps) keep the registry's accessor. What a field evaluates to is unchanged.

// FindStructFieldType implements types.Provider.
func (o orderedTypes) FindStructFieldType(structType, fieldName string) (*types.FieldType, bool) {
	ft, found := o.Provider.FindStructFieldType(structType, fieldName)
	if !found {
		return ft, found
	}
	if get, ok := inputFieldGetters()[structType+"."+fieldName]; ok {
		fast := *ft
		slow := ft.GetFrom
		fast.GetFrom = func(obj any) (any, error) {
			if v, ok := get(obj); ok {
				return v, nil
			}
			return slow(obj)
		}
		return &fast, true
	}
	return ft, found
}

// fieldGetter reads one field of an input struct, or *struct, as a CEL value; false when obj
// is not of the struct's type.
type fieldGetter func(obj any) (ref.Val, bool)

// inputFieldGetters are the getters of the string, bool and integer fields of the input
// types, by "<CEL type name>.<field name>".
var inputFieldGetters = sync.OnceValue(func() map[string]fieldGetter {
	out := map[string]fieldGetter{}
	for _, t := range inputVariables {
		addFieldGetters(t, out)
	}
	return out
})

func addFieldGetters(t reflect.Type, out map[string]fieldGetter) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		key := celTypeName(t) + "." + name
		switch f.Type.Kind() {
		case reflect.String:
			out[key] = structField(t, i, func(v reflect.Value) ref.Val { return types.String(v.String()) })
		case reflect.Bool:
			out[key] = structField(t, i, func(v reflect.Value) ref.Val { return types.Bool(v.Bool()) })
		case reflect.Int64:
			out[key] = structField(t, i, func(v reflect.Value) ref.Val { return types.Int(v.Int()) })
		case reflect.Struct:
			if f.Type.PkgPath() == t.PkgPath() {
				addFieldGetters(f.Type, out)
			}
		}
	}
}

// structField is the getter of field i of struct type t, converted by conv.
func structField(t reflect.Type, i int, conv func(reflect.Value) ref.Val) fieldGetter {
	return func(obj any) (ref.Val, bool) {
		v := reflect.Indirect(reflect.ValueOf(obj))
		if v.Type() != t {
			return nil, false
		}
		return conv(v.Field(i)), true
	}
}
