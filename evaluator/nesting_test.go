package evaluator_test

import (
	"strings"
	"testing"
)

// nested is a list literal nested depth levels deep compared with [].
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + " != []"
}

// cel-go's checker grows with the cube of an expression's nesting: `[[[…1…]]] != []` of depth
// 240, 486 characters, took 8.6 s to compile (the webhook has 5 s, the controller recompiles
// on each start). Deeper than the bound is refused at the expression's field path, saying
// why; the deepest admitted compiles fast (BenchmarkDeepestAdmittedNesting).
func TestDeepNestingIsRefused(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{nested(32), nested(240), "size([1]" + strings.Repeat(".map(x, [x])", 40) + ") > 0"} {
		_, errs := c.Compile(newPolicy("p", skipRule("r", expr, "R", "", "")), nil)
		if len(errs) != 1 || errs[0].Field != "spec.skipRules[0].expression" ||
			!strings.Contains(errs[0].Error(), "nests more than 32 levels deep") {
			t.Errorf("%.60s…: errors %v, want one at spec.skipRules[0].expression saying it nests too deep", expr, errs)
		}
	}
	if _, errs := c.Compile(newPolicy("p", skipRule("r", nested(31), "R", "", "")), nil); len(errs) > 0 {
		t.Errorf("depth 31: %v, want admitted", errs)
	}
}

// BenchmarkDeepestAdmittedNesting reports the time to compile a policy of the deepest
// admitted nesting (31 levels), whose compile time grows with the cube of the depth. Run with
//
//	go test ./evaluator -run '^$' -bench DeepestAdmittedNesting
func BenchmarkDeepestAdmittedNesting(b *testing.B) {
	c := newCompiler(b)
	p := newPolicy("p", skipRule("r", nested(31), "R", "", ""),
		skipRule("m", "size([1]"+strings.Repeat(".map(x, [x])", 29)+") > 0", "R", "", ""))
	for b.Loop() {
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}
