package evaluator_test

import (
	"strings"
	"testing"
)

// Harmless expressions whose dyn() hides a scalar compile: before, each was refused as "the
// nested lists and maps of … have no size the estimate can derive" (atk15 07-*). Class: an
// error that blames the wrong thing.
func TestDynOfAScalarIsNoNestedCollection(t *testing.T) {
	c := newCompiler(t)
	for _, p := range [][]policyOption{
		{skipRule("r", "dyn(1)+dyn(2)==dyn(3)", "X", "", "")},
		{variable("a", "dyn(vm.name) == dyn(vm.name) ? dyn(vm.name) : dyn(vm.name)"), skipRule("r", "variables.a == 'x'", "X", "", "")},
		{variable("a", "vm.name == '' ? dyn(1) : dyn('x')"), variable("b", "dyn(variables.a)"), skipRule("r", "variables.b == 'x'", "X", "", "")},
	} {
		if _, errs := c.Compile(newPolicy("p", p...), nil); len(errs) > 0 {
			t.Errorf("refused: %v", errs)
		}
	}
}

// An expression reading a refused variable says so, instead of an estimated cost of
// 18446744073709551615 and a hint to "iterate over … a variable" (atk15
// 07-cascade-hint-contradiction.yaml). Class: an error that blames the wrong thing.
func TestAnExpressionReadingARefusedVariableNamesIt(t *testing.T) {
	p := newPolicy("p", variable("a", "vm.annotations[?'x'].orValue('').split(',')"),
		variable("b", "variables.a.filter(x, x != '')"),
		skipRule("r", "variables.b.exists(x, x == 'a')", "X", "", ""))
	_, errs := newCompiler(t).Compile(p, nil)
	want := map[string]string{
		"spec.variables[0].expression": "exceeds the per-call limit",
		"spec.variables[1].expression": "reads variables.a (refused at spec.variables[0].expression)",
		"spec.skipRules[0].expression": "reads variables.b (refused at spec.variables[1].expression)",
	}
	if len(errs) != len(want) {
		t.Fatalf("errors %v, want one for each of %v", errs, want)
	}
	for _, e := range errs {
		if !strings.Contains(e.Error(), want[e.Field]) || strings.Contains(e.Error(), "18446744073709551615") {
			t.Errorf("%s: %v, want it to say %q", e.Field, e, want[e.Field])
		}
	}
}

// A chain of variables ending in dyn() is sized by its derived bound: before, the estimate
// left a dyn variable unsized and refused `variables.b + variables.b` at a cost of ~1.8e18,
// "no iteration", naming nothing. An expression refused without iteration names the
// variables it reads with their sizes, as it names the inputs.
func TestDynVariablesAreSizedAndNamed(t *testing.T) {
	c := newCompiler(t)
	p := newPolicy("p", variable("a", "vm.name"), variable("b", "dyn(variables.a + variables.a)"),
		variable("c", "variables.b + variables.b"), skipRule("r", "variables.c.contains('x')", "X", "", ""))
	if _, errs := c.Compile(p, nil); len(errs) > 0 {
		t.Errorf("refused: %v", errs)
	}
	p = newPolicy("p", variable("a", "vm.annotations[?'x'].orValue('')"),
		skipRule("r", "variables.a.lowerAscii().contains(variables.a.upperAscii())", "X", "", ""))
	_, errs := c.Compile(p, nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "no iteration") ||
		!strings.Contains(errs[0].Error(), "variables.a (up to 262144 characters or entries)") {
		t.Errorf("errors %v, want the rule refused, naming variables.a and its size", errs)
	}
}
