package evaluator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// lateProgram finishes just after the deadline of the context it is given: the stand-in for
// a library call that cannot be interrupted and returns late.
type lateProgram struct{ cel.Program }

func (p lateProgram) ContextEval(ctx context.Context, in any) (ref.Val, *cel.EvalDetails, error) {
	v, det, err := p.Program.ContextEval(context.Background(), in)
	<-ctx.Done()
	return v, det, err
}

// lateSet compiles the policies, the first one's first match condition finishing just after
// the deadline, with the built-in default last.
func lateSet(t *testing.T, ps ...*v1alpha1.ClusterIPAMPolicy) *Set {
	t.Helper()
	c, err := NewCompiler(Limits{Deadline: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var compiled []*Policy
	for _, p := range ps {
		cp, errs := c.Compile(p, nil)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		compiled = append(compiled, cp)
	}
	compiled[0].matchConditions[0].prog = lateProgram{compiled[0].matchConditions[0].prog}
	compiled[0].matchConditions[0].interruptible = true // run under ContextEval
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	builtin, errs := c.Compile(b, b)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return NewSet(compiled, builtin)
}

func latePolicy(name string, priority int32, mutate func(*v1alpha1.ClusterIPAMPolicy)) *v1alpha1.ClusterIPAMPolicy {
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Priority:        priority,
		MatchConditions: []v1alpha1.NamedExpression{{Name: "m", Expression: "vm.name != ''"}},
		Allocation:      &v1alpha1.Expression{Expression: "'Auto'"},
	}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// A call that finishes just after the deadline is blamed for it: before, it succeeded and the
// next expression evaluated (builtin:default's first skip rule) failed with "not evaluated:
// context deadline exceeded", sending the admin to the wrong policy.
func TestTheDeadlineIsBlamedOnTheExpressionItPassedIn(t *testing.T) {
	set := lateSet(t, latePolicy("slow", 1, nil))
	d := set.Decide(context.Background(), Input{VM: VM{Name: "vm-a"}}, Options{})
	want := "policy slow: spec.matchConditions[0].expression: finished after the deadline"
	if d.Reason != ReasonPolicyError || len(d.Trace.Errors) == 0 || !strings.HasPrefix(d.Trace.Errors[0], want) {
		t.Errorf("decision = %s %q, want a PolicyError whose first error starts %q", d.Reason, d.Trace.Errors, want)
	}
}

// The message of a decision that ran out of time names the policy and the deadline, not the
// expression: which one was running when the time ran out varies with the load, and a
// NetworkReady message that changed from retry to retry was rewritten each time (atk8). The
// same slow call in two places of one policy gives one message (the trace still tells them
// apart).
func TestTheMessageOfALateDecisionDoesNotDependOnWhereTheTimeRanOut(t *testing.T) {
	first := lateSet(t, latePolicy("slow", 1, nil)).Decide(context.Background(), Input{VM: VM{Name: "vm-a"}}, Options{})
	second := lateSet(t, latePolicy("slow", 1, func(p *v1alpha1.ClusterIPAMPolicy) {
		p.Spec.MatchConditions = append([]v1alpha1.NamedExpression{{Name: "m", Expression: "vm.name != ''"}},
			v1alpha1.NamedExpression{Name: "n", Expression: "true"})
	}))
	d2 := second.Decide(context.Background(), Input{VM: VM{Name: "vm-a"}}, Options{})
	if first.Message != d2.Message || !strings.Contains(first.Message, "policy slow: the evaluation did not finish within the deadline") {
		t.Errorf("messages %q and %q, want one naming the policy and the deadline", first.Message, d2.Message)
	}
}

// An Audit policy never decides and an Ignore policy is passed over on error: one whose
// expression runs past the deadline must not fail the interface. Before, the enforcing
// policies after it got "not evaluated: context deadline exceeded" and the interface a
// PolicyError. Now the interface is evaluated again without it, with its own deadline, and
// the slow policy is recorded (an Audit record with the error, or Ignored).
func TestASlowTrialOrIgnorePolicyDoesNotFailTheInterface(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.ClusterIPAMPolicy)
	}{
		{"audit", func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Mode = v1alpha1.PolicyModeAudit }},
		{"ignore", func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.FailurePolicy = v1alpha1.FailurePolicyIgnore }},
	} {
		set := lateSet(t, latePolicy("trial", 1, tc.mutate), latePolicy("enforced", 2, nil))
		d := set.Decide(context.Background(), Input{VM: VM{Name: "vm-a"}}, Options{})
		if d.Reason == ReasonPolicyError || d.Allocation != AllocationAuto || d.Provenance.Allocation != "enforced" {
			t.Errorf("%s: decision = %s %q (allocation %q by %q), want enforced's Auto", tc.name, d.Reason, d.Message, d.Allocation, d.Provenance.Allocation)
			continue
		}
		errs := strings.Join(d.Trace.Errors, "\n")
		if !strings.Contains(errs, "policy trial: spec.matchConditions[0].expression") {
			t.Errorf("%s: trace errors %q, want trial's", tc.name, errs)
		}
		switch tc.name {
		case "audit":
			if len(d.Trace.Audit) != 1 || d.Trace.Audit[0].Policy != "trial" || d.Trace.Audit[0].Error == "" {
				t.Errorf("audit records %+v, want trial's error", d.Trace.Audit)
			}
		case "ignore":
			if len(d.Trace.Ignored) != 1 || d.Trace.Ignored[0] != "trial" {
				t.Errorf("ignored %v, want [trial]", d.Trace.Ignored)
			}
		}
	}
}
