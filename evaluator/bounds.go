package evaluator

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Bounds for strings and collections whose field carries no maxSize tag: map keys are
// qualified names (Kubernetes: 317 characters); other elements DNS-1123 names (253). A field
// may raise its elements' bound with an elemMaxSize tag (annotation values: 256 KiB, the
// API server's limit on all annotations together).
const (
	defaultKeySize  = 317
	defaultElemSize = 253
)

// sizeTag reads a numeric struct tag (maxSize, elemMaxSize); 0 when absent.
func sizeTag(f reflect.StructField, name string) uint64 {
	tag := f.Tag.Get(name)
	if tag == "" {
		return 0
	}
	v, err := strconv.ParseUint(tag, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("evaluator: bad %s tag on %s: %v", name, f.Name, err))
	}
	return v
}

// checkBounds reports the first value of in beyond the bounds the static cost estimate
// assumes (the same maxSize/elemMaxSize tags, walked the same way), as "<CEL path>: <size>,
// at most <bound>"; nil when in is within them. Enforcing them is what makes "compiles"
// mean "cannot exceed the per-call limit".
func (in *Input) checkBounds() error {
	v := reflect.ValueOf(in).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if err := checkStruct(name, v.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

func checkStruct(path string, v reflect.Value) error {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p := path + "." + name
		if err := checkField(p, v.Field(i), sizeTag(f, "maxSize"), cmpOr(sizeTag(f, "elemMaxSize"), defaultElemSize)); err != nil {
			return err
		}
	}
	return nil
}

func checkField(path string, v reflect.Value, bound, elem uint64) error {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type().PkgPath() == reflect.TypeFor[Input]().PkgPath() {
			return checkStruct(path, v)
		}
	case reflect.String:
		return within(path, "characters", v.Len(), bound)
	case reflect.Slice:
		if err := within(path, "entries", v.Len(), bound); err != nil {
			return err
		}
		for i := range v.Len() {
			if err := within(fmt.Sprintf("%s[%d]", path, i), "characters", v.Index(i).Len(), elem); err != nil {
				return err
			}
		}
	case reflect.Map:
		if err := within(path, "entries", v.Len(), bound); err != nil {
			return err
		}
		for it := v.MapRange(); it.Next(); {
			k := it.Key().String()
			if err := within(path+" key "+strconv.Quote(truncate(k)), "characters", len(k), defaultKeySize); err != nil {
				return err
			}
			if err := within(path+"["+truncate(k)+"]", "characters", it.Value().Len(), elem); err != nil {
				return err
			}
		}
	}
	return nil
}

func within(path, unit string, n int, bound uint64) error {
	if bound > 0 && uint64(n) > bound {
		return fmt.Errorf("%s: %d %s, at most %d", path, n, unit, bound)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func cmpOr(a, b uint64) uint64 {
	if a != 0 {
		return a
	}
	return b
}

// checkVariableSize reports a variable's value beyond the sizes the static estimate assumes
// for it (variableSize): at most variableSizeBound characters or entries, and each element,
// key and value (at any depth) at most variableElemBound. The estimate cannot derive a
// variable's size from its expression; enforcing the assumption makes an estimate that passed
// hold at run time — a larger value fails closed instead of costing more than estimated.
func checkVariableSize(v ref.Val) error {
	if err := sizeWithin(v, variableSizeBound); err != nil {
		return fmt.Errorf("value of %s, beyond the bound the cost estimate assumes for a variable", err)
	}
	return nil
}

// sizeWithin checks v's size against bound and its elements' against variableElemBound. The walk
// visits what the expression built, so it is bounded by the cost already charged for it.
func sizeWithin(v ref.Val, bound uint64) error {
	var n uint64
	unit := "entries"
	switch x := v.(type) {
	case types.String:
		if uint64(len(x)) <= bound {
			return nil
		}
		n, unit = uint64(utf8.RuneCountInString(string(x))), "characters"
	case types.Bytes:
		n, unit = uint64(len(x)), "bytes"
	case traits.Mapper:
		n = uint64(x.Size().(types.Int))
		if n <= bound {
			for it := x.Iterator(); it.HasNext() == types.True; {
				k := it.Next()
				if err := sizeWithin(k, variableElemBound); err != nil {
					return err
				}
				if err := sizeWithin(x.Get(k), variableElemBound); err != nil {
					return err
				}
			}
		}
	case traits.Lister:
		n = uint64(x.Size().(types.Int))
		if n <= bound {
			for it := x.Iterator(); it.HasNext() == types.True; {
				if err := sizeWithin(it.Next(), variableElemBound); err != nil {
					return err
				}
			}
		}
	default:
		return nil
	}
	if n > bound {
		return fmt.Errorf("%d %s, at most %d", n, unit, bound)
	}
	return nil
}
