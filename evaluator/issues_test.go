package evaluator_test

import (
	"strings"
	"testing"
)

// A compile error reports a few of an expression's errors, each with the source around it:
// cel-go's own text has every error (up to 100) with its whole source line, so that 60 rules
// of 1 KiB chains with a type error per term built ~12 MB of error text in ~0.9 s of the
// webhook's CPU (issue #15).
func TestCompileErrorsAreBoundedAndLocated(t *testing.T) {
	chain := "1 in [1,dyn(1)]"
	for len(chain) < 1000 {
		chain += "||1 in [1,dyn(1)]"
	}
	errs := compileRule(newCompiler(t), chain)
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want one", errs)
	}
	detail := errs[0].Detail
	for _, want := range []string{"ERROR: <input>:1:12: expected type 'int' but found 'dyn'", " | 1 in [1,dyn(1)]||1 in", " | ...........^", "more errors)"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail lacks %q:\n%s", want, detail)
		}
	}
	if len(detail) > 1024 {
		t.Errorf("detail is %d bytes, want at most 1 KiB:\n%s", len(detail), detail)
	}
}

// A parse error deep in a long line shows the source around its column, cut on both sides.
func TestParseErrorShowsItsNeighbourhood(t *testing.T) {
	expr := strings.Repeat("vm.name == 'a' || ", 100) + "vm.name == = 'b'"
	errs := compileRule(newCompiler(t), expr)
	if len(errs) != 1 {
		t.Fatalf("errors = %v, want one", errs)
	}
	detail := errs[0].Detail
	if !strings.Contains(detail, "ERROR: <input>:1:1812:") || !strings.Contains(detail, "…") || len(detail) > 512 {
		t.Errorf("detail = %q, want the error at 1:1812 with a cut snippet, under 512 bytes", detail)
	}
}
