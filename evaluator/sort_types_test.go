package evaluator_test

import (
	"strings"
	"testing"
)

// sort() and sortBy() of a list the checker knows only as dyn compiled and failed at run time
// on every VM when the list held values cel-go cannot order ("list elements must be
// comparable"): an IP, a Semver, a Quantity, a list (issue #15, tester atk9). They are refused
// when written, saying where and what to sort instead; sorting a typed list of an ordered
// kind stays admitted.
func TestSortingValuesOfUnknownTypeIsRefused(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"dyn([ip(vm.annotations[?'a'].orValue('10.0.0.1'))]).sort().size() == 1",
		"dyn([semver(vm.annotations[?'a'].orValue('1.0.0')), semver('2.0.0')]).sort().size() == 2",
		"dyn([[vm.name]]).sort().size() == 1",
		"dyn([quantity(vm.annotations[?'a'].orValue('1'))]).sortBy(x, x).size() == 1",
		"[vm.name].sortBy(x, dyn(optional.of(x))).size() == 1",
	} {
		errs := compileRule(c, expr)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "sort() or sortBy() at 1:") ||
			!strings.Contains(errs[0].Error(), "sort a list of ints") {
			t.Errorf("%s: errors %v, want it refused naming the sort", expr, errs)
		}
	}
	for _, expr := range []string{
		"[vm.name, vm.namespace].sort().size() == 2",
		"[3, 1, 2].sort() == [1, 2, 3]",
		"[vm.name].sortBy(x, size(x)).size() == 1",
		"[duration('1s')].sort().size() == 1",
	} {
		if errs := compileRule(c, expr); len(errs) > 0 {
			t.Errorf("%s: %v, want it admitted", expr, errs)
		}
	}
}
