package evaluator_test

import (
	"strings"
	"testing"
)

// Our AST sizers (format()'s argument sizes, the regex input bound, join's parts) read the
// shape of an expression; a wrapper that erases or picks a type — dyn(), a ternary — hid that
// shape, and the sizer took the unknown argument for a small one:
// `'%s'.format([dyn([vm.labels, …])])` was admitted, then failed at run time on labels within
// their bounds (/tmp/a15w fd4.yaml). Class: a type-erasing wrapper hiding structure from an
// AST sizer. Each sizer sees through dyn() and both branches of a ternary; a shape it still
// cannot know is refused, not assumed small.
func TestWrappersDoNotHideSizesFromTheEstimate(t *testing.T) {
	labels := strings.TrimSuffix(strings.Repeat("vm.labels, ", 11), ", ")
	cases := []string{
		"size('%s'.format([dyn([" + labels + "])])) < 0",
		"size('%s'.format([dyn(dyn([" + labels + "]))])) < 0",
		"size('%s'.format([vm.name == 'x' ? [" + labels + "] : []])) < 0",
		"size('%s'.format([dyn(vm.name == 'x' ? [" + labels + "] : [])])) < 0",
		"size('%s'.format(dyn([[" + labels + "]]))) < 0",
		"size('%s'.format([vm.labels.map(k, dyn([vm.labels]))])) < 0",
		"size('%s'.format([vm.labels.map(k, dyn([vm.labels]))[0]])) < 0",
		"lists.range(40).exists(i, (vm.annotations['a'] + vm.annotations['b'] + vm.annotations['c']).matches('a.{100}b'))",
		"lists.range(40).exists(i, dyn(vm.annotations['a'] + vm.annotations['b'] + vm.annotations['c']).matches('a.{100}b'))",
	}
	c := newCompiler(t)
	for _, expr := range cases {
		t.Run(expr, func(t *testing.T) {
			errs := compileRule(c, expr)
			if len(errs) == 0 {
				t.Errorf("admitted, want refused: its worst case is beyond the limits")
			}
		})
	}
}

// Seeing through a wrapper keeps what is small admitted.
func TestWrappersAroundSmallValuesStayAdmitted(t *testing.T) {
	cases := []string{
		"'%s'.format([dyn(vm.name)]) != ''",
		"'%s'.format([vm.name == 'x' ? vm.name : 'y']) != ''",
		"'%s-%s'.format([dyn([vm.name, 'a']), dyn(1)]) != ''",
		"dyn(vm.name).matches('^a')",
	}
	c := newCompiler(t)
	for _, expr := range cases {
		t.Run(expr, func(t *testing.T) {
			if errs := compileRule(c, expr); len(errs) > 0 {
				t.Errorf("refused: %v", errs)
			}
		})
	}
}
