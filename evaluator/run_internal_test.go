package evaluator

import (
	"context"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// countingProgram counts the evaluations of the program it wraps.
type countingProgram struct {
	cel.Program
	n *int
}

func (c countingProgram) ContextEval(ctx context.Context, in any) (ref.Val, *cel.EvalDetails, error) {
	*c.n++
	return c.Program.ContextEval(ctx, in)
}

func (c countingProgram) Eval(in any) (ref.Val, *cel.EvalDetails, error) {
	*c.n++
	return c.Program.Eval(in)
}

func TestVariablesAreEvaluatedAtMostOncePerInterface(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	uses := "variables.v != ''"
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Variables:       []v1alpha1.NamedExpression{{Name: "v", Expression: "vm.name"}, {Name: "unused", Expression: "vm.uid"}},
		MatchConditions: []v1alpha1.NamedExpression{{Name: "m", Expression: uses}},
		Allocation:      &v1alpha1.Expression{Expression: uses + " ? 'Auto' : 'None'"},
		SkipRules: []v1alpha1.SkipRule{
			{Name: "a", Expression: "!(" + uses + ")", Reason: "A"},
			{Name: "b", Expression: uses, Reason: "B", MessageExpression: "variables.v + variables.v"},
		},
		Hotplug: &v1alpha1.Expression{Expression: uses},
	}}
	compiled, errs := c.Compile(p, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var used, unused int
	compiled.variables[0].prog = countingProgram{compiled.variables[0].prog, &used}
	compiled.variables[1].prog = countingProgram{compiled.variables[1].prog, &unused}
	builtin, errs := c.Compile(&v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "b"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{Allocation: &v1alpha1.Expression{Expression: "'None'"}}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	set := NewSet([]*Policy{compiled}, builtin)
	in := Input{VM: VM{Name: "vm-a"}}

	for i := 1; i <= 3; i++ {
		d := set.Decide(context.Background(), in, Options{})
		if d.Rule != "b" || d.Message != "vm-avm-a" {
			t.Fatalf("decision = %+v, want rule b with message vm-avm-a", d)
		}
		if used != i || unused != 0 {
			t.Errorf("after %d interfaces: v evaluated %d times, unused %d times; want %d and 0", i, used, unused, i)
		}
	}
}

// noCostProgram evaluates without a cost reading, as a program built without cost tracking.
type noCostProgram struct{ cel.Program }

func (p noCostProgram) ContextEval(ctx context.Context, in any) (ref.Val, *cel.EvalDetails, error) {
	v, _, err := p.Program.ContextEval(ctx, in)
	return v, nil, err
}

func (p noCostProgram) Eval(in any) (ref.Val, *cel.EvalDetails, error) {
	v, _, err := p.Program.Eval(in)
	return v, nil, err
}

// A missing runtime cost reading must not count as free: the evaluation fails closed.
// Before, it added 0 and the decision went through.
func TestMissingCostReadingFailsClosed(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Allocation: &v1alpha1.Expression{Expression: "'Auto'"}}}
	compiled, errs := c.Compile(p, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	compiled.allocation.prog = noCostProgram{compiled.allocation.prog}
	d := NewSet([]*Policy{compiled}, compiled).Decide(context.Background(), Input{}, Options{})
	if d.Allocation != AllocationUnknown || d.Reason != ReasonPolicyError {
		t.Errorf("decision = %+v, want a PolicyError for the missing cost reading", d)
	}
}

// An expression with a comprehension or more than maxUncheckedCalls calls runs under
// ContextEval with its calls checking the deadline (cost.Interruptible): one of thousands of
// calls without a comprehension stops within one call of its deadline. One of a few calls
// runs under Eval, which sets no context up.
func TestLongExpressionsAreInterruptible(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	calls := func(n int) string {
		return strings.TrimSuffix(strings.Repeat("vm.name.contains('x') || ", n), " || ")
	}
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{calls(3), false},
		{calls(maxUncheckedCalls / 2), false},
		{calls(maxUncheckedCalls + 1), true},
		{"vm.labels.exists(k, k == 'a')", true},
	} {
		p, errs := c.Compile(&v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: v1alpha1.ClusterIPAMPolicySpec{Hotplug: &v1alpha1.Expression{Expression: tc.expr}}}, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if got := p.hotplug.interruptible; got != tc.want {
			t.Errorf("%.60s: interruptible = %v, want %v", tc.expr, got, tc.want)
		}
	}
}
