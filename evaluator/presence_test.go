package evaluator_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// has() on a map or list of the input is false when it is null, absent or empty, as in
// Kubernetes, where the API server drops an empty metadata.labels (omitempty) and a null one
// (pruning), and true when it holds an entry. Every map and list field of Input is tried,
// found by reflection so that a new one cannot be forgotten. Before, has(vm.labels) was true
// with `labels: null`: the input was normalized to empty maps.
func TestHasIsFalseOnNullAndEmptyCollections(t *testing.T) {
	c := newCompiler(t)
	paths := collectionPaths(reflect.TypeFor[evaluator.Input](), "")
	if len(paths) < 5 {
		t.Fatalf("found only %v", paths)
	}
	for _, path := range paths {
		set := setOf(t, c, newPolicy("p", matchCondition("m", "has("+path+") && size("+path+") >= 0")))
		for _, tc := range []struct {
			name string
			fill func(reflect.Value)
			want bool
		}{
			{"null", func(v reflect.Value) { v.SetZero() }, false},
			{"empty", func(v reflect.Value) { v.Set(emptyOf(v.Type())) }, false},
			{"one entry", func(v reflect.Value) { v.Set(oneOf(v.Type())) }, true},
		} {
			in := pooledAuto()
			tc.fill(fieldAt(reflect.ValueOf(&in).Elem(), path))
			d := decide(set, in)
			if got := d.Provenance.Allocation == "p"; got != tc.want || d.Reason == evaluator.ReasonPolicyError {
				t.Errorf("has(%s) with %s: policy matched = %v, want %v (%s %q)", path, tc.name, got, tc.want, d.Reason, d.Message)
			}
		}
	}
}

// collectionPaths lists the CEL paths of the map and list fields of t.
func collectionPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		path := strings.TrimPrefix(prefix+"."+name, ".")
		switch f.Type.Kind() {
		case reflect.Map, reflect.Slice:
			out = append(out, path)
		case reflect.Struct:
			out = append(out, collectionPaths(f.Type, path)...)
		}
	}
	return out
}

// fieldAt is the field of v at a CEL path.
func fieldAt(v reflect.Value, path string) reflect.Value {
	for _, step := range strings.Split(path, ".") {
		for i := range v.NumField() {
			if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); name == step {
				v = v.Field(i)
				break
			}
		}
	}
	return v
}

func emptyOf(t reflect.Type) reflect.Value {
	if t.Kind() == reflect.Map {
		return reflect.MakeMap(t)
	}
	return reflect.MakeSlice(t, 0, 0)
}

func oneOf(t reflect.Type) reflect.Value {
	if t.Kind() == reflect.Map {
		m := reflect.MakeMap(t)
		m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v"))
		return m
	}
	return reflect.Append(reflect.MakeSlice(t, 0, 1), reflect.ValueOf("v"))
}
