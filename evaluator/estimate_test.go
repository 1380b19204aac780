package evaluator_test

import (
	"strings"
	"testing"
)

// Literal lists have a known size and type() is constant time: policies using them are
// harmless and must compile. Before, the library estimated ~3.7e18 for includes() on a
// literal list and ~1.8e18 for type(interface.index) == int.
func TestEstimatesOfLiteralsAndTypeCompile(t *testing.T) {
	for _, expr := range []string{
		"['corp', 'tenant-b'].includes(interface.name)",
		"['corp', 'tenant-b'].indexOf(interface.name) >= 0",
		"type(interface.index) == int",
		"interface.name in ['corp', 'tenant-b']",
	} {
		t.Run(expr, func(t *testing.T) {
			if _, errs := newCompiler(t).Compile(newPolicy("p", matchCondition("m", expr)), nil); len(errs) > 0 {
				t.Errorf("Compile: %v", errs.ToAggregate())
			}
		})
	}
}

// A refused estimate names the input whose size it could not bound.
func TestRefusedEstimateNamesTheUnboundedInput(t *testing.T) {
	_, errs := newCompiler(t).Compile(newPolicy("p",
		matchCondition("m", "vm.name.split(',').all(a, vm.name.split(',').exists(b, a == b))")), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `the size of vm.name.split(",") is unbounded`) {
		t.Errorf("Compile errors = %v, want the unbounded split named", errs)
	}
}

// Joining a literal list or the split of a bounded string, and an optional map value's
// orValue, have bounded sizes: before, each was refused with an estimate of ~1.8e18.
func TestJoinSplitAndOrValueAreEstimatedBounded(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{"['a', 'b'].join('-') != ''", "vm.name.split('-').join('.') != ''",
		"[vm.name, interface.name].join() != ''", "vm.labels[?'team'].orValue('').contains('x')"} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", expr)), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want it to compile", expr, errs)
		}
	}
}
