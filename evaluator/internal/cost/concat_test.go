package cost

import (
	"reflect"
	"strings"
	"testing"
)

// `+` of two lists builds a flat list, charged by its elements: cel-go's lazy chain
// (concatList) made every later Get walk it (issue #15, tester atk6). A comprehension's
// accumulator still appends in place.
func TestListConcatenationIsFlatAndCharged(t *testing.T) {
	env := testEnv(t, testConfig())
	eval := func(src string) (string, uint64) {
		v, cost, err := eval(t, env, src, testVM{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		return reflect.TypeOf(v).String(), cost
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
