package evaluator

import (
	"maps"
	"slices"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Determinism: cel-go iterates a Go map in Go's random map order, so an expression such as
// vm.labels.map(k, k + '=' + vm.labels[k]).join(',') could give a different string, and a
// different decision, on every call. The environment therefore presents the input's maps
// (labels, annotations) as orderedMaps, which iterate in key order. Maps an expression builds
// itself (literals, comprehension results) keep CEL's unspecified order.

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
