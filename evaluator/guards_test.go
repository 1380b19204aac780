package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// A library call whose work grows with the value of its input, not its length, is refused
// when its argument is a literal past the bound: before, each of these compiled with a cost
// in single digits and ran for seconds (quantity parsing and rescaling) or formatted
// megabytes per call (format precision).
func TestGuardedLiteralsAreRefused(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct{ expr, want string }{
		{"quantity('1e9999999') == quantity('1')", "quantity(): argument beyond the bound policies are evaluated with: exponent 9999999, at most ±64"},
		{"quantity('1e-9999999').asApproximateFloat() > 0.0", "quantity(): argument beyond the bound policies are evaluated with: exponent -9999999"},
		{"quantity('1" + strings.Repeat("0", 70) + "').isInteger()", "quantity(): argument beyond the bound policies are evaluated with: 71 characters, at most 64"},
		{"quantity('" + strings.Repeat("9", 63) + "00') == quantity('1')", "quantity(): argument beyond the bound policies are evaluated with: 65 characters"},
		{"'%.999999f'.format([1.0]) != ''", "format(): argument beyond the bound policies are evaluated with: precision 999999, at most 100"},
		{"'%s and %.101e'.format(['a', 1.0]) != ''", "format(): argument beyond the bound policies are evaluated with: precision 101, at most 100"},
	} {
		_, errs := c.Compile(newPolicy("p", matchCondition("m", tc.expr)), nil)
		if len(errs) != 1 || errs[0].Field != "spec.matchConditions[0].expression" || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: errors %v, want one naming %q", tc.expr, errs, tc.want)
		}
	}
	for _, ok := range []string{"quantity('1e64') == quantity('1')", "quantity('1.5Gi').isGreaterThan(quantity('100M'))",
		"'%.100f %e %s %%.999f'.format([1.0, 2.0, 'x']) != ''", "isQuantity('1e9999999') == false"} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", ok)), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want it to compile", ok, errs)
		}
	}
}

// The same bounds hold for a value that comes from the input: the evaluation fails closed
// (PolicyError naming the function and the bound) before the library runs, and isQuantity
// answers false. Before, quantity(vm.annotations['q']) with 1e-9999999 ran for seconds.
func TestGuardedInputsFailClosed(t *testing.T) {
	c := newCompiler(t)
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"q": "1e-9999999", "big": "1e65"}
	in.IPAddress.Reason = "%.999999f"
	for _, tc := range []struct{ expr, want string }{
		{"quantity(vm.annotations['q']) == quantity('1')", "quantity(): argument beyond the bound policies are evaluated with: exponent -9999999, at most ±64"},
		{"quantity(vm.annotations['big']) == quantity('1')", "quantity(): argument beyond the bound policies are evaluated with: exponent 65"},
		{"ipAddress.reason.format([1.0]) != ''", "format(): argument beyond the bound policies are evaluated with: precision 999999, at most 100"},
	} {
		d := decide(setOf(t, c, newPolicy("p", matchCondition("m", tc.expr))), in)
		if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, tc.want) {
			t.Errorf("%s: %s %q, want a PolicyError naming %q", tc.expr, d.Reason, d.Message, tc.want)
		}
	}
	d := decide(setOf(t, c, newPolicy("p", matchCondition("m", "!isQuantity(vm.annotations['q'])"))), in)
	if d.Reason == evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationAuto {
		t.Errorf("isQuantity past the bound: %s %q, want false (the policy matches and decides Auto)", d.Reason, d.Message)
	}
}

// format() is charged by what it renders: a %f clause in a loop over the labels is refused by
// the estimate (before: 6 units a call, ~1 ms each), and a format string from the input is
// charged at run time. isURL() is charged by the length it parses, up to its guard's 2,048
// characters, as url() is (before: 1 unit whatever the length).
func TestUnderchargedCallsAreCharged(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{"vm.labels.all(k, '%f'.format([1.0]) != k)"} {
		_, errs := c.Compile(newPolicy("p", matchCondition("m", expr)), nil)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "exceeds the per-call limit") {
			t.Errorf("%s: errors %v, want the estimate past the per-call limit", expr, errs)
		}
	}
	in := pooledAuto()
	in.IPAddress.Reason = strings.Repeat("%e", 30)
	set := setOf(t, c, newPolicy("p", matchCondition("m", "ipAddress.reason.format([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]) != ''")))
	if d := decide(set, in); d.Cost < 30*1000 {
		t.Errorf("cost %d of thirty %%e clauses, want at least 30,000", d.Cost)
	}
	set = setOf(t, c, newPolicy("p", matchCondition("m", "isURL(vm.annotations[?'u'].orValue(''))")))
	short, long := pooledAuto(), pooledAuto()
	long.VM.Annotations = map[string]string{"u": "https://example.com/" + strings.Repeat("a", 2048-20)}
	if spent := decide(set, long).Cost - decide(set, short).Cost; spent < 150 {
		t.Errorf("isURL() of 2,048 characters charged %d more than of none, want at least 150 (one per ten characters parsed)", spent)
	}
}

// format() of an input field is estimated with the field's real bound: an annotation value
// may hold 256 KiB, not the 253 characters every non-literal argument was assumed to have.
// Before, '%s%s%s%s'.format of four annotations compiled at an estimate of ~150 and was
// charged ~105,000 at run time (the per-call limit).
func TestFormatOfAnInputIsEstimatedWithItsBound(t *testing.T) {
	c := newCompiler(t)
	ann := "vm.annotations['a']"
	refused := "'a' in vm.annotations && '%s%s%s%s'.format([" + strings.Repeat(ann+", ", 3) + ann + "]) != ''"
	_, errs := c.Compile(newPolicy("p", matchCondition("m", refused)), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
		t.Errorf("errors = %v, want the estimate refused", errs)
	}
	for _, ok := range []string{"'%s-%d'.format([vm.name, interface.index]) != ''",
		"'a' in vm.annotations && '%s'.format([vm.annotations['a']]) != ''"} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", ok)), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want it to compile", ok, errs)
		}
	}
}

// A call on literals that fails (a conversion out of range, bytes that are not UTF-8) fails on
// every evaluation: it is refused as an invalid expression naming the call and what is wrong,
// not reported as an internal error of the compiler (the environment folds constant calls
// when it plans the program, and their errors surfaced from there as "Internal error").
func TestFailingConstantCallsAreInvalid(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct{ expr, call, want string }{
		{`string(b'\xff\xfe') != ''`, `string(b"\377\376")`, "invalid UTF-8"},
		{`int(1e30) > 0`, `int(1e+30)`, "integer overflow"},
		{`int(-1e30) > 0`, `int(-1e+30)`, "integer overflow"},
		{`uint(-1) > 0u`, `uint(-1)`, "unsigned integer overflow"},
		{`uint(1e30) > 0u`, `uint(1e+30)`, "unsigned integer overflow"},
		{`int(18446744073709551615u) > 0`, `int(18446744073709551615u)`, "integer overflow"},
		{`int('99999999999999999999') > 0`, `int("99999999999999999999")`, "type conversion error"},
		{`double('x') > 0.0`, `double("x")`, "type conversion error"},
		{`vm.name != '' && int(dyn(1.5e300) + 1.0) > 0`, `int(dyn(1.5e+300) + 1.0)`, "integer overflow"},
		{`vm.name + string(b'a' + b'\xff') != ''`, `string(b"\141" + b"\377")`, "invalid UTF-8"},
	} {
		_, errs := c.Compile(newPolicy("p", matchCondition("m", tc.expr)), nil)
		if len(errs) != 1 || errs[0].Type != field.ErrorTypeInvalid || errs[0].Field != "spec.matchConditions[0].expression" ||
			!strings.Contains(errs[0].Detail, tc.call+": ") || !strings.Contains(errs[0].Detail, tc.want) {
			t.Errorf("%s: errors %v, want one Invalid naming %s and %q", tc.expr, errs, tc.call, tc.want)
		}
	}
	if _, errs := c.Compile(newPolicy("p", matchCondition("m", `string(b'abc') == 'abc' && int(1e18) > 0`)), nil); len(errs) > 0 {
		t.Errorf("constant calls that succeed: %v, want them to compile", errs)
	}
}

// format() of a nested collection is estimated from the bounds of what it nests, or refused
// when an expression computes it (its formatted size has no bound the estimate knows); and at
// run time an argument list too large to format within the per-call limit fails before it is
// formatted, naming format(). Before, each of these compiled with a flat argument's estimate
// and failed at run time with "actual cost limit exceeded", after formatting megabytes.
func TestFormatOfNestedCollections(t *testing.T) {
	c := newCompiler(t)
	anns := "[vm.annotations, vm.annotations, vm.annotations]"
	for _, tc := range []struct{ expr, want string }{
		{"'%s'.format([[" + anns + "]]) != ''", "estimated worst-case cost"},
		{"'%s'.format([vm.labels.map(k, [vm.labels, vm.labels])]) != ''", "format(): the argument at 1:14 is a computed nested collection (list(list(map(string, string))))"},
		{"'%s'.format(vm.labels.map(k, [k, k])) != ''", "format(): the argument at 1:13 is a computed nested collection (list(list(string)))"},
	} {
		_, errs := c.Compile(newPolicy("p", matchCondition("m", tc.expr)), nil)
		if len(errs) != 1 || errs[0].Field != "spec.matchConditions[0].expression" || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%s: errors %v, want one naming %q", tc.expr, errs, tc.want)
		}
	}
	for _, ok := range []string{"'%s %s'.format([[vm.name, interface.name], {'a': [1, 2]}]) != ''",
		"'%s'.format([vm.labels.map(k, k)]) != ''", "'%s %s'.format([vm.labels, [vm.labels]]) != ''"} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", ok)), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want it to compile", ok, errs)
		}
	}
	in := pooledAuto()
	in.VM.Annotations = map[string]string{}
	for i := range 200 {
		in.VM.Annotations[fmt.Sprintf("a%d", i)] = strings.Repeat("x", 4000)
	}
	set := setOf(t, c, newPolicy("p", matchCondition("m",
		"'%s'.format([dyn(vm.annotations.map(k, [vm.annotations[k], vm.annotations[k]]))]) != ''")))
	d := decide(set, in)
	if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "spec.matchConditions[0].expression: format(): ") ||
		!strings.Contains(d.Message, "more than 1000000 characters") {
		t.Errorf("%s %q, want a PolicyError naming format() and the characters it may produce", d.Reason, d.Message)
	}
}

// A failing constant call in a branch that is not always taken fails only when that branch is
// evaluated, yet the expression cannot be kept: cel-go folds constant calls when it plans the
// program (Kubernetes' environment sets OptOptimize), so the program of a stored expression
// with one cannot even be built. The refusal says so; before, it said "it fails on every
// evaluation", untrue of `vm.name == 'never' ? string(b'\xff') : …`.
func TestAFailingConstantCallInABranchIsRefusedTruthfully(t *testing.T) {
	c := newCompiler(t)
	p := newPolicy("p", matchCondition("m", `vm.name == 'never' ? string(b'\xff') != '' : true`))
	for _, old := range []*v1alpha1.ClusterIPAMPolicy{nil, p} { // new, then stored (planned only)
		_, errs := c.Compile(p, old)
		if len(errs) != 1 || errs[0].Type != field.ErrorTypeInvalid ||
			!strings.Contains(errs[0].Detail, "fails whenever it is evaluated") ||
			!strings.Contains(errs[0].Detail, "folds constant calls") || strings.Contains(errs[0].Detail, "every evaluation") {
			t.Errorf("stored = %v: errors %v, want one Invalid saying it fails whenever evaluated and why it is refused", old != nil, errs)
		}
	}
}

// %x renders a string's bytes as two characters each: the estimate counted one, so
// '%x'.format([an annotation]) was admitted and then stopped by the per-call limit on a
// within-bounds annotation of 262,000 characters (tester's finding C).
func TestHexFormatIsSizedTwoCharactersAByte(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"'%x'.format([vm.annotations[?'a'].orValue('')]).contains('zz')",
		"'%X'.format([vm.annotations[?'a'].orValue('')]).contains('zz')",
	} {
		p := newPolicy("p", matchCondition("m", expr))
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			continue // refused by its estimate: fine
		}
		in := pooledAuto()
		in.VM.Annotations = map[string]string{"a": strings.Repeat("a", 262000)}
		if d := decide(setOf(t, c, p), in); d.Reason == evaluator.ReasonPolicyError {
			t.Errorf("%s: admitted, then %q on a within-bounds input", expr, d.Message)
		}
	}
	// A hex clause on a short input stays admitted.
	mustCompile(t, c, newPolicy("p", matchCondition("m", "'%x'.format([vm.name]) != ''")))
}

// A variable holding a %x format is bounded at two characters a byte too: on a 253-character
// name it was held to 255 and failed with "506 characters".
func TestHexFormatVariableBound(t *testing.T) {
	c := newCompiler(t)
	p := newPolicy("p", variable("hex", "'%x'.format([vm.name])"), matchCondition("m", "size(variables.hex) > 0"))
	in := pooledAuto()
	in.VM.Name = strings.Repeat("n", 253)
	if d := decide(setOf(t, c, p), in); d.Provenance.Allocation != "p" {
		t.Errorf("decision %s %q, want p's", d.Reason, d.Message)
	}
}

// format() and join() size each element of a literal argument list by the same derived
// bounds as every other expression (variables, concatenations, an optional's value): format()
// assumed any element neither a literal nor an input path formats to 328,704 characters, so
// it admitted `'%s'.format([variables.v + variables.v])`, then stopped it at run time on the
// per-call limit (524,000 characters) or on its 1,000,000-character guard (a list variable of
// four long strings), and join() refused `[variables.nm, 'a'].join('-')` at ~1.8e18 (issue #15).
// A comprehension's variable is sized by its range's elements in format(), join() and the
// regex calls alike (x.matches() over a 524,000-character x was estimated at 328,704).
func TestFormatAndJoinSizeElementsByTheirDerivedBounds(t *testing.T) {
	c := newCompiler(t)
	v := variable("v", "vm.annotations[?'x'].orValue('')")
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"x": strings.Repeat("a", 262000)}
	for _, p := range []*v1alpha1.ClusterIPAMPolicy{
		newPolicy("p", v, matchCondition("m", "'%s'.format([variables.v + variables.v]).size() > 0")),
		newPolicy("p", v, matchCondition("m", "'%s'.format([{'k': variables.v + variables.v}]).size() > 0")),
		newPolicy("p", v, variable("l", "lists.range(4).map(i, variables.v)"), matchCondition("m", "'%s'.format([variables.l]).size() > 0")),
		newPolicy("p", v, variable("l", "lists.range(4).map(i, variables.v)"), matchCondition("m", "'%s'.format(variables.l).size() > 0")),
		// A comprehension's variable is sized by its range's elements, not assumed 328,704 long.
		newPolicy("p", v, matchCondition("m", "[variables.v + variables.v].exists(x, '%s'.format([x]).size() > 0)")),
		newPolicy("p", v, matchCondition("m", "[variables.v + variables.v].exists(x, x.matches('b'))")),
	} {
		expr := p.Spec.MatchConditions[0].Expression
		_, errs := c.Compile(p, nil)
		if len(errs) == 0 {
			d := decide(setOf(t, c, p), in)
			t.Errorf("%s: admitted, then %s %q on a within-bounds input; want it refused at compile time", expr, d.Reason, d.Message)
		} else if !strings.Contains(fmt.Sprint(errs), "estimated worst-case cost") {
			t.Errorf("%s: %v, want refused by its estimate", expr, errs)
		}
	}
	in.VM.Name = strings.Repeat("n", 253)
	in.VM.Labels = map[string]string{"team": strings.Repeat("t", 63)}
	for _, p := range []*v1alpha1.ClusterIPAMPolicy{
		newPolicy("p", variable("nm", "vm.name"), matchCondition("m", "[variables.nm, 'a'].join('-') != 'x'")),
		newPolicy("p", matchCondition("m", "[vm.labels[?'team'].orValue(''), 'a'].join('-') != 'x'")),
		newPolicy("p", variable("nm", "vm.name"), matchCondition("m", "'%s-%s'.format([variables.nm + variables.nm, [variables.nm]]) != 'x'")),
		newPolicy("p", v, matchCondition("m", "'%s'.format([variables.v]).size() > 0")),
		newPolicy("p", v, variable("l", "lists.range(2).map(i, vm.name)"), matchCondition("m", "'%s'.format(variables.l).size() > 0")),
		newPolicy("p", variable("nm", "vm.name"), matchCondition("m", "[variables.nm].exists(x, [x, 'a'].join('-') == 'x')")),
	} {
		expr := p.Spec.MatchConditions[0].Expression
		if _, errs := c.Compile(p, nil); len(errs) > 0 {
			t.Errorf("%s: %v, want admitted (its elements are bounded)", expr, errs)
			continue
		}
		if d := decide(setOf(t, c, p), in); d.Reason == evaluator.ReasonPolicyError {
			t.Errorf("%s: admitted, then %q on a within-bounds input", expr, d.Message)
		}
	}
}
