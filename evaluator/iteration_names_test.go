package evaluator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
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

// optMap() and optFlatMap() name their accumulator: it was not in the bound analysis's scope,
// so a name shadowing an input was sized as the input: an admitted rule failed on its cost at
// run time (issue #15, tester atk16 finding 1). It is refused by its estimate now.
func TestAnOptMapVariableIsSizedByItsValue(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"vm.annotations.exists(k, optional.of({'name': vm.annotations[k]}).optMap(vm, vm.name.matches('z+q') || vm.name.matches('q+z') || vm.name.matches('y+z')).orValue(false))",
	} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", expr)), nil); len(errs) == 0 {
			t.Errorf("%.70s…: admitted, want refused by its estimate", expr)
		}
	}
}

// The deep walk bound an accumulator as an empty value, so the body of optMap()/optFlatMap()
// over a list of 5,000 concatenated it twenty times for nothing in the estimate: admitted,
// then charged 109,545 against the per-call limit (issue #15, tester atk16 finding 2). The
// same body over an iteration variable was refused; both are now, and a body whose cost fits
// is still admitted and decides.
func TestAnOptMapAccumulatorIsSizedInTheDeepWalk(t *testing.T) {
	c := newCompiler(t)
	body := "x" + strings.Repeat(" + x", 19)
	for _, expr := range []string{
		"optional.of(lists.range(5000)).optMap(x, " + body + ").orValue([]).size() == 0",
		"optional.of(lists.range(5000)).optFlatMap(x, optional.of(" + body + ")).orValue([]).size() == 0",
		"[lists.range(5000)].exists(x, (" + body + ").size() == 0)",
	} {
		_, errs := c.Compile(newPolicy("p", matchCondition("m", expr)), nil)
		if !strings.Contains(fmt.Sprint(errs), "exceeds the per-call limit") {
			t.Errorf("%.60s…: %v, want refused by its estimate", expr, errs)
		}
	}
	small := "optional.of(lists.range(50)).optMap(x, x + x + x).orValue([]).size() == 150"
	s := setOf(t, c, newPolicy("p", matchCondition("m", small), allocation("'None'")))
	d := s.Decide(context.Background(), pooledAuto(), evaluator.Options{})
	if d.Reason == evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationNone {
		t.Errorf("%s: decided %+v, want None by policy p", small, d)
	}
}

// An optMap() name that reuses the name of a loop variable around it was sized by the
// estimator as that loop variable, whose bound it took from its own walk of the
// comprehensions: admitted at 50–90, charged up to 262,179 and stopped by the per-call limit
// on a 256 KiB annotation (issue #15, tester atk19). The estimator sizes names from the scope
// the bound analysis builds; each is refused now.
func TestAnOptMapNameShadowingALoopVariableIsSizedByItsValue(t *testing.T) {
	c := newCompiler(t)
	body := "x.indexOf('b') + x.indexOf('c') + x.indexOf('d') + x.indexOf('e') + x.indexOf('f')"
	for _, expr := range []string{
		"['a'].exists(x, optional.of(vm.annotations['a']).optMap(x, " + body + ").orValue(0) > 0)",
		"['a'].exists(x, optional.of(vm.annotations['a']).optFlatMap(x, optional.of(" + body + ")).orValue(0) > 0)",
		"{'a': 'b'}.exists(x, optional.of(vm.annotations['a']).optMap(x, " + body + ").orValue(0) > 0)",
		"[1].exists(i, x, optional.of(vm.annotations['a']).optMap(x, " + body + ").orValue(0) > 0)",
		"['a'].exists(x, optional.of(vm.annotations['a']).optMap(x, x.matches('^(a|b)*c$') && x.matches('^(a|c)*b$')).orValue(false))",
	} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", expr)), nil); !strings.Contains(fmt.Sprint(errs), "exceeds the per-call limit") {
			t.Errorf("%.70s…: %v, want refused by its estimate", expr, errs)
		}
	}
}
