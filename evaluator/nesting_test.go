package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// nested is a list literal nested depth levels deep compared with [].
func nested(depth int) string {
	return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) + " != []"
}

// nestedCalls is dyn() nested depth levels deep: syntactic nesting that builds no type.
func nestedCalls(depth int) string {
	return strings.Repeat("dyn(", depth) + "1" + strings.Repeat(")", depth) + " != 0"
}

// cel-go's checker grows with the cube of an expression's nesting: `[[[…1…]]] != []` of depth
// 240, 486 characters, took 8.6 s to compile (the webhook has 5 s, the controller recompiles
// on each start). Deeper than the bound is refused at the expression's field path, saying
// why; the deepest admitted compiles fast (BenchmarkDeepestAdmittedNesting).
func TestDeepNestingIsRefused(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{nested(32), nested(240), "size([1]" + strings.Repeat(".map(x, [x])", 40) + ") > 0"} {
		errs := compileRule(c, expr)
		if len(errs) != 1 || errs[0].Field != "spec.skipRules[0].expression" ||
			!strings.Contains(errs[0].Error(), "nests more than 32 levels deep") {
			t.Errorf("%.60s…: errors %v, want one at spec.skipRules[0].expression saying it nests too deep", expr, errs)
		}
	}
	if _, errs := c.Compile(newPolicy("p", skipRule("r", nestedCalls(31), "R", "", "")), nil); len(errs) > 0 {
		t.Errorf("depth 31: %v, want admitted", errs)
	}
}

// BenchmarkDeepestAdmittedNesting reports the time to compile a policy of the deepest
// admitted nesting (31 levels), whose compile time grows with the cube of the depth (the
// types it builds are bounded apart, TestDeepTypesAreRefused). Run with
//
//	go test ./evaluator -run '^$' -bench DeepestAdmittedNesting
func BenchmarkDeepestAdmittedNesting(b *testing.B) {
	c := newCompiler(b)
	p := newPolicy("p", skipRule("r", nestedCalls(31), "R", "", ""),
		skipRule("m", "size([1]"+strings.Repeat(".map(x, x)", 29)+") > 0", "R", "", ""))
	for b.Loop() {
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// doublingChain is holders.vms wrapped in a list per element, then levels-2 more times by
// .map(x, [x, x]): a value of list types nested levels deep.
func doublingChain(levels int) string {
	return "holders.vms.map(x, [x])" + strings.Repeat(".map(x, [x, x])", levels-2)
}

// cel-go's checker grows with the depth of the types an expression builds: 65 skip rules
// comparing two chains of 13 list levels took 1.3 s of CPU to compile (FuzzGeneratedPolicy),
// though each nests far less than maxNestingDepth syntactically. A value deeper than 8 list
// or map levels is refused before the checker runs, at the expression's field path, saying
// why; whether the levels come from literals, comprehensions or a variable's type.
func TestDeepTypesAreRefused(t *testing.T) {
	c := newCompiler(t)
	deep := doublingChain(13)
	for _, p := range []struct {
		name string
		opt  policyOption
		path string
	}{
		{"chains", skipRule("r", "sets.contains("+deep+", "+deep+")", "R", "", ""), "spec.skipRules[0].expression"},
		{"literal", skipRule("r", strings.Repeat("[", 9)+"vm.name"+strings.Repeat("]", 9)+" != []", "R", "", ""), "spec.skipRules[0].expression"},
		{"map literal", skipRule("r", strings.Repeat("{'k': ", 9)+"1"+strings.Repeat("}", 9)+" != {}", "R", "", ""), "spec.skipRules[0].expression"},
		{"chain", hotplug(doublingChain(9) + ".size() > 0"), "spec.hotplug.expression"},
	} {
		_, errs := c.Compile(newPolicy("p", p.opt), nil)
		if len(errs) != 1 || errs[0].Field != p.path || !strings.Contains(errs[0].Error(), "nested list or map levels") {
			t.Errorf("%s: errors %v, want one at %s saying the value nests too many levels", p.name, errs, p.path)
		}
	}
	// A variable's type carries its levels into the expressions that read it.
	_, errs := c.Compile(newPolicy("p", variable("v", doublingChain(6)),
		hotplug("[[[variables.v]]].size() > 0")), nil)
	if len(errs) != 1 || errs[0].Field != "spec.hotplug.expression" || !strings.Contains(errs[0].Error(), "9 nested list or map levels") {
		t.Errorf("variable: errors %v, want one at spec.hotplug.expression saying 9 levels", errs)
	}
}

// Values of up to 8 levels compile, whatever builds them.
func TestTypesOfEightLevelsCompile(t *testing.T) {
	c := newCompiler(t)
	for _, opt := range []policyOption{
		hotplug(strings.Repeat("[", 8) + "vm.name" + strings.Repeat("]", 8) + " != []"),
		hotplug(doublingChain(8) + ".size() > 0"),
		hotplug("vm.labels.map(k, [k, vm.labels[k]]).exists(p, p[0] == 'a')"),
	} {
		if _, errs := c.Compile(newPolicy("p", opt), nil); len(errs) > 0 {
			t.Errorf("%v", errs)
		}
	}
	if _, errs := c.Compile(newPolicy("p", variable("v", doublingChain(6)), hotplug("[[variables.v]].size() > 0")), nil); len(errs) > 0 {
		t.Errorf("variable: %v", errs)
	}
}

// BenchmarkDeepestAdmittedTypes reports the time to compile the finding of
// TestDeepTypesAreRefused at the deepest admitted types: 65 skip rules, each comparing two
// sets.contains of two chains of 8 list levels (refused by their cost, after type-checking).
//
//	go test ./evaluator -run '^$' -bench DeepestAdmittedTypes
func BenchmarkDeepestAdmittedTypes(b *testing.B) {
	c := newCompiler(b)
	e := doublingChain(8)
	one := "sets.contains(" + e + ", " + e + ")"
	p := newPolicy("p")
	for i := range 65 {
		p.Spec.SkipRules = append(p.Spec.SkipRules, v1alpha1.SkipRule{Name: fmt.Sprint("r", i), Reason: "R",
			Message: "r", Expression: "(" + one + ") != (" + one + ")"})
	}
	for b.Loop() {
		if _, errs := c.Compile(p, nil); len(errs) != 65 {
			b.Fatalf("%d errors, want 65 (each rule's cost)", len(errs))
		}
	}
}

// cel-go nests a chain of `+` one level an operator (it balances only || and &&): a 34-term
// concatenation is refused for its nesting, and the refusal names the chain and what to do
// instead of brackets the expression does not have (it spoke of "brackets, calls, operands").
func TestALongOperatorChainIsNamed(t *testing.T) {
	c := newCompiler(t)
	terms := make([]string, 34)
	for i := range terms {
		terms[i] = fmt.Sprintf("'%d'", i)
	}
	expr := strings.Join(terms, " + ") + " == vm.name"
	errs := compileRule(c, expr)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "a chain of 33 `+` operators") ||
		!strings.Contains(errs[0].Error(), "split the chain into variables") || strings.Contains(errs[0].Error(), "brackets") {
		t.Errorf("errors %v, want one naming the chain of 33 `+` operators", errs)
	}
	if _, errs := c.Compile(newPolicy("p", skipRule("r", nested(240), "R", "", "")), nil); len(errs) != 1 ||
		strings.Contains(errs[0].Error(), "chain") {
		t.Errorf("nested brackets: %v, want the nesting refusal without a chain", errs)
	}
}
