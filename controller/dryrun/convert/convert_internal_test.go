package convert

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/vmipam/vmipam/controller/plan"
	"github.com/vmipam/vmipam/evaluator"
)

var update = flag.Bool("update", false, "rewrite testdata/interface_result.json from the conversion")

// Every field of the served types is filled from the internals: an interface result with every
// field of the plan's, the evaluator's decision, trace and input set converts to one with every
// field of the API's set. A field the API declares but the conversion forgets fails here.
func TestConvertFillsEveryField(t *testing.T) {
	got := interfaceResult(filledResult())
	for _, path := range unset(reflect.ValueOf(got), "InterfaceResult") {
		t.Errorf("%s is not set by the conversion", path)
	}
}

// The wire format of an interface's result, every field set, is pinned by
// testdata/interface_result.json: the JSON the dry-run API and ipamctl served before the API
// declared its own types (when it served plan.InterfaceResult as it was). A change of it is a
// change of the served API. Rewrite it with -update only for a change made on purpose.
func TestTheServedJSONOfAnInterfaceIsPinned(t *testing.T) {
	data, err := json.MarshalIndent(interfaceResult(filledResult()), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	data = append(data, '\n')
	const file = "testdata/interface_result.json"
	if *update {
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		t.Errorf("served JSON differs from %s:\n%s", file, data)
	}
}

// What the internals leave empty is served as before: no trace when the decision has none, a
// null list or map where the input has none, and an empty list where it has an empty one.
func TestEmptyAndAbsentAreServedAsBefore(t *testing.T) {
	for _, c := range []struct {
		name string
		in   any
		want string
	}{
		{"a result without a trace", interfaceResult(plan.InterfaceResult{}),
			`{"index":0,"type":"","name":"","attached":false,"decision":{"allocation":"","skip":false,"hotplug":false,"policy":"","provenance":{}}}`},
		{"a trace with an empty list", Decision(evaluator.Decision{Trace: evaluator.Trace{Matched: []string{}}}).Trace,
			`{}`},
		{"holders null and empty", []any{Input(&evaluator.Input{}).Holders, Input(&evaluator.Input{Holders: evaluator.Holders{VMs: []string{}}}).Holders},
			`[{"vms":null,"holder":""},{"vms":[],"holder":""}]`},
		{"labels null", Input(&evaluator.Input{}).Namespace, `{"name":"","labels":null}`},
		{"no input", Input(nil), `null`},
	} {
		data, err := json.Marshal(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != c.want {
			t.Errorf("%s: %s, want %s", c.name, data, c.want)
		}
	}
	if d := Decision(evaluator.Decision{Trace: evaluator.Trace{Matched: []string{}}}); d.Trace.Matched == nil {
		t.Error("an empty list of the trace became null: the trace would be left out")
	}
}

// filledResult is an interface result with every field set, down to the trace's input.
func filledResult() plan.InterfaceResult {
	var r plan.InterfaceResult
	fill(reflect.ValueOf(&r).Elem(), "r")
	return r
}

// fill sets every field reachable from v to a value derived from its path: strings to the
// path, numbers to its length, booleans true, one element per list and map.
func fill(v reflect.Value, path string) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(path)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(len(path)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), path+"[0]")
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		key, elem := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(key, path+".key")
		fill(elem, path+"[key]")
		v.SetMapIndex(key, elem)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		panic(fmt.Sprintf("fill: %s: unhandled kind %s", path, v.Kind()))
	}
}

// unset lists the paths of the fields reachable from v that hold their zero value.
func unset(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return unset(v.Elem(), path)
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			return []string{path}
		}
		var out []string
		if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				out = append(out, unset(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
			}
			return out
		}
		for it := v.MapRange(); it.Next(); {
			out = append(out, unset(it.Value(), fmt.Sprintf("%s[%v]", path, it.Key()))...)
		}
		return out
	case reflect.Struct:
		var out []string
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				out = append(out, unset(v.Field(i), path+"."+v.Type().Field(i).Name)...)
			}
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}
