package evaluator_test

import "testing"

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
