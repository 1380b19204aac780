package evaluator

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/cel-go/interpreter"
)

// `+` of two lists builds a flat list, charged by its elements: cel-go's lazy chain
// (concatList) made every later Get walk it, so that a list built by 31 variables each adding
// to the one before, compared with itself, walked ~1,000 links per element — ~0.2 s for ~100
// units (issue #15, tester atk6). A comprehension's accumulator still appends in place.
func TestListConcatenationIsFlatAndCharged(t *testing.T) {
	env := newExpressionsEnv(t)
	eval := func(src string) (string, uint64) {
		checked, iss := env.Compile(src)
		if failed(iss) {
			t.Fatalf("%s: %v", src, iss.Err())
		}
		prg, err := env.Program(checked)
		if err != nil {
			t.Fatal(err)
		}
		v, det, err := prg.Eval(interpreter.EmptyActivation())
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return reflect.TypeOf(v).String(), *det.ActualCost()
	}
	if typ, _ := eval("(lists.range(3) + lists.range(4)) + lists.range(5)"); strings.Contains(typ, "concat") {
		t.Errorf("a concatenation is a %s, want a flat list", typ)
	}
	_, short := eval("lists.range(10) + lists.range(10)")
	_, long := eval("lists.range(500) + lists.range(500)")
	if long-short < (1000-20)/concatListUnit {
		t.Errorf("concatenating 1,000 elements cost %d more than 20, want at least %d: the copy charged", long-short, (1000-20)/concatListUnit)
	}
	if typ, _ := eval("lists.range(300).map(i, i * 2)"); typ == "" {
		t.Error("map over 300 elements did not evaluate")
	}
}
