package evaluator_test

import (
	"fmt"
	"strings"
	"testing"
)

// An iteration variable named `variables` shadowed the policy's variables for CEL but not
// for the bound analysis, which sized `variables.v` of an element as the policy variable v:
// an admitted rule over the annotations failed on its cost at run time (issue #15, tester
// atk15). It is refused, with one and two iteration variables alike.
func TestAnIterationVariableNamedVariablesIsRefused(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"vm.annotations.map(k, {'v': vm.annotations[k]}).exists(variables, variables.v.matches('z+q'))",
		"vm.labels.map(k, {'v': k}).all(variables, variables.v != '')",
		"vm.labels.map(k, {'v': k}).exists(i, variables, variables.v != '')",
	} {
		_, errs := c.Compile(newPolicy("p", variable("v", "'a'"), matchCondition("m", expr)), nil)
		if !strings.Contains(fmt.Sprint(errs), "an iteration variable may not be named `variables`") {
			t.Errorf("%s: %v, want refused naming the iteration variable", expr, errs)
		}
	}
}
