package evaluator

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// skipRulePolicy is a policy with the one skip rule expr.
func skipRulePolicy(expr string, vars ...v1alpha1.NamedExpression) *v1alpha1.ClusterIPAMPolicy {
	return &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Variables: vars,
		SkipRules: []v1alpha1.SkipRule{{Name: "r", Reason: "R", Message: "m", Expression: expr}}}}
}

// splitRules are realistic rules over split() that were refused though bounded (issue #15,
// finding 7): the range bound ignored split's literal limit (262,145 parts for an annotation
// split with a limit of 64), `in` on the flat list of parts was charged as if it walked
// 64,769 elements, and the parts of an inline split() had no size (1.8e19) while the same
// split held in a variable was sized.
var splitRules = []string{
	"vm.annotations[?'nets'].orValue('').split(',', 64).exists(n, n == interface.name)",
	"interface.name in vm.annotations[?'nets'].orValue('').split(',', 64)",
	"interface.name.split('-').exists(p, p.upperAscii() == 'DMZ')",
	"interface.name.split('-').map(p, p.upperAscii()).exists(p, p == 'DMZ')",
	"interface.name.split('-', 3).exists(p, p.startsWith('dmz'))",
}

// splitInputs fill what the rules read to their bounds in the shapes that make split work
// most: a 262,144-character annotation of no separator, of separators only, and of one-
// character parts; a 253-character interface name likewise.
func splitInputs() []map[string]any {
	var out []map[string]any
	for _, fill := range []struct{ nets, name string }{
		{strings.Repeat("a", 262144), strings.Repeat("d", 253)},
		{strings.Repeat(",", 262144), strings.Repeat("-", 253)},
		{strings.Repeat("a,", 131072), strings.Repeat("d-", 126) + "d"},
	} {
		act := boundsInput()
		act["vm"].(*VM).Annotations["nets"] = fill.nets
		act["interface"].(*Interface).Name = fill.name
		out = append(out, act)
	}
	return out
}

// The realistic split rules are admitted, and their estimates bound what they are charged
// on inputs at their bounds.
func TestSplitRulesAreAdmittedWithinTheirEstimates(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	env := newExpressionsEnv(t)
	for _, expr := range splitRules {
		if _, errs := c.Compile(skipRulePolicy(expr), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want admitted", expr, errs)
			continue
		}
		checked, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		est, err := env.EstimateCost(checked, estimatorOf(checked.NativeRep(), nil))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		deep, _, _ := deepCharges(checked.NativeRep(), nil)
		estimate := addSaturating(est.Max, deep)
		prg, err := env.Program(checked, cel.CostLimit(1<<40))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		for i, act := range splitInputs() {
			_, det, err := prg.Eval(act)
			if err != nil {
				t.Errorf("%s, input %d: %v", expr, i, err)
				continue
			}
			if actual := *det.ActualCost(); actual > estimate {
				t.Errorf("%s, input %d: charged %d, estimated at most %d", expr, i, actual, estimate)
			}
		}
	}
}

// What split's bounds must still refuse: iterating over the parts of an annotation without a
// limit or with one past the comprehension range, nesting iterations over them, and work
// per part that grows with the receiver.
func TestHostileSplitShapesStayRefused(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	nets := "vm.annotations[?'nets'].orValue('')"
	for _, tc := range []struct{ expr, want string }{
		{nets + ".split(',').exists(n, n == interface.name)", "estimated worst-case cost"},
		{nets + ".split(',', 1000).exists(n, n == interface.name)", "iterates over up to 1000 elements"},
		{nets + ".split(',', 512).exists(n, " + nets + ".split(',', 512).exists(m, m == n))", "estimated worst-case cost"},
		{nets + ".split(',', 64).exists(n, n.matches('^a+$'))", "estimated worst-case cost"},
		{"interface.name in " + nets + ".split('')", "estimated worst-case cost"},
	} {
		_, errs := c.Compile(skipRulePolicy(tc.expr), nil)
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.want) {
			t.Errorf("%s: %v, want refused: %s", tc.expr, errs, tc.want)
		}
	}
}

// A macro's own accumulation (`@result + [x]`, appended in place, charged nothing beyond
// cel-go's unit at run time: concatListCost) is no concatenation: a list built of values
// whose size the estimate cannot derive is refused naming the value. Before, accumulator()
// knew only the older "__result__", not "@result", and the refusal read "+ of the operand at
// 1:21: the lists it concatenates have no size", a + the user never wrote.
func TestAMacrosAccumulationNamesTheUnsizedElement(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ expr, want string }{
		{"lists.range(4).map(i, vm.labels.transformMap(k, v, '%s'.format([k].map(j, j)))).size() > 0",
			"the list the comprehension at 1:19 builds: the value the comprehension at 1:45 builds has no size the estimate can derive"},
		{"lists.range(4).map(i, [vm.labels.transformMap(k, v, '%s'.format([k].map(j, j)))]).size() > 0",
			"the list the comprehension at 1:19 builds: the value the comprehension at 1:46 builds has no size"},
	} {
		_, errs := c.Compile(skipRulePolicy(tc.expr), nil)
		if msg := errs.ToAggregate(); msg == nil || !strings.Contains(msg.Error(), tc.want) || strings.Contains(msg.Error(), "+ of") {
			t.Errorf("%s: %v, want refused: %s", tc.expr, errs, tc.want)
		}
	}
	for _, expr := range []string{"lists.range(512).map(i, [i, i]).size() > 0", "vm.labels.map(k, url(k)).size() > 0",
		"lists.range(4).map(i, url('https://h/?a=1').getQuery()).size() > 0", "lists.range(4).map(i, optional.of(vm.name)).size() > 0"} {
		if _, errs := c.Compile(skipRulePolicy(expr), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want admitted: its elements are sized", expr, errs)
		}
	}
}

// A + the user wrote, of a list whose elements have no derived size, is refused naming the
// element, not the list.
func TestAConcatenationOfUnsizedElementsNamesThem(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	expr := "([vm.labels.transformMap(k, v, '%s'.format([k].map(j, j)))] + [vm.labels]).size() > 0"
	_, errs := c.Compile(skipRulePolicy(expr), nil)
	if want := "+ at 1:61: the value the comprehension at 1:25 builds has no size the estimate can derive"; len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
		t.Errorf("%s: %v, want refused: %s", expr, errs, want)
	}
}
