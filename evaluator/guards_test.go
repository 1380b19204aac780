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

// At run time an argument list too large to format within the per-call limit fails before it
// is formatted, naming format(): the library charges format() by its format string, and the
// output's charge (ours) comes after it is built.
func TestFormatOfNestedCollections(t *testing.T) {
	c := newCompiler(t)
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
