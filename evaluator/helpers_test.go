package evaluator_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// testDeadline is the evaluation deadline of the package's test compilers (newCompiler, and
// compilerWith when the limits leave Deadline 0), instead of DefaultLimits' 1 s: a test's
// decision is about cost, formatting or semantics, and on a loaded 2-core CI machine its
// heavier expressions took longer than a second of wall time — a PolicyError for time, not for
// what the test checks (ten doublings in TestVariablesAreFormattedOnlyWhenExplainedAndBounded,
// after the accounts tests and a starved deadline test before it). A test about the deadline
// sets its own.
const testDeadline = time.Minute

// newCompiler returns a compiler with the default limits but testDeadline, or fails the test.
func newCompiler(t testing.TB) *evaluator.Compiler {
	t.Helper()
	return compilerWith(t, evaluator.Limits{})
}

// mustCompile compiles p as a stored policy or fails the test with the errors.
func mustCompile(t testing.TB, c *evaluator.Compiler, p *v1alpha1.ClusterIPAMPolicy) *evaluator.Policy {
	t.Helper()
	compiled, errs := c.Compile(p, p)
	if len(errs) > 0 {
		t.Fatalf("Compile(%s): %v", p.Name, errs.ToAggregate())
	}
	return compiled
}

// defaultSet returns a Set with no installed policy: the built-in default decides.
func defaultSet(t testing.TB, c *evaluator.Compiler) *evaluator.Set {
	t.Helper()
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return evaluator.NewSet(nil, mustCompile(t, c, b))
}

// pooledAuto is an interface on a Ready ClusterNetwork with a pool, whose own Auto IPAddress
// is allocated: the happy path every case below varies.
func pooledAuto() evaluator.Input {
	return evaluator.Input{
		VM:        evaluator.VM{Name: "vm-a", Namespace: "ns", UID: "uid-a", Phase: "Running"},
		Interface: evaluator.Interface{Index: 1, Type: "ClusterNetwork", Name: "corp"},
		Network: evaluator.Network{Exists: true, Ready: true, IPAMEnabled: true,
			Pool: evaluator.Ref{Kind: "ClusterIPAddressPool", Name: "corp-pool"}},
		IPAddress: evaluator.IPAddress{Exists: true, Name: "vm-a-clusternetwork-corp", Type: "Auto",
			NetworkRef: evaluator.Ref{Kind: "ClusterNetwork", Name: "corp"}, Phase: "Allocated",
			Address: "10.0.0.5", Allocated: true, Owner: evaluator.Owner{Name: "vm-a", UID: "uid-a"}},
		Namespace: evaluator.Namespace{Name: "ns"},
	}
}

// pooledStatic is pooledAuto with ipAddressName set to the user's allocated Static IPAddress.
func pooledStatic() evaluator.Input {
	in := pooledAuto()
	in.Interface.IPAddressName = "web"
	in.IPAddress = evaluator.IPAddress{Exists: true, Name: "web", Type: "Static",
		NetworkRef: evaluator.Ref{Kind: "ClusterNetwork", Name: "corp"}, Phase: "Allocated",
		Address: "10.0.0.9", Allocated: true}
	return in
}

// policyOption changes one part of a test policy.
type policyOption func(*v1alpha1.ClusterIPAMPolicy)

// newPolicy builds a policy that matches everything and decides Auto, changed by opts.
func newPolicy(name string, opts ...policyOption) *v1alpha1.ClusterIPAMPolicy {
	p := &v1alpha1.ClusterIPAMPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.ClusterIPAMPolicySpec{
			Priority:   100,
			Allocation: &v1alpha1.Expression{Expression: "'Auto'"},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func priority(n int32) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Priority = n }
}

func allocation(expr string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Allocation = &v1alpha1.Expression{Expression: expr} }
}

// noAllocation leaves the allocation to the next policy.
func noAllocation(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Allocation = nil }

// layer builds a policy that sets only what opts set (no allocation unless given).
func layer(name string, opts ...policyOption) *v1alpha1.ClusterIPAMPolicy {
	return newPolicy(name, append([]policyOption{noAllocation}, opts...)...)
}

func variable(name, expr string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) {
		p.Spec.Variables = append(p.Spec.Variables, v1alpha1.NamedExpression{Name: name, Expression: expr})
	}
}

func matchCondition(name, expr string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) {
		p.Spec.MatchConditions = append(p.Spec.MatchConditions, v1alpha1.NamedExpression{Name: name, Expression: expr})
	}
}

// skipRule adds a rule; message and messageExpression are optional ("").
func skipRule(name, expr, reason, message, messageExpression string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) {
		p.Spec.SkipRules = append(p.Spec.SkipRules, v1alpha1.SkipRule{Name: name, Expression: expr,
			Reason: reason, Message: message, MessageExpression: messageExpression})
	}
}

// compileRule compiles, as new, a policy whose one skip rule is expr, and returns its errors.
func compileRule(c *evaluator.Compiler, expr string) field.ErrorList {
	_, errs := c.Compile(newPolicy("p", skipRule("r", expr, "R", "", "")), nil)
	return errs
}

func hotplug(expr string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Hotplug = &v1alpha1.Expression{Expression: expr} }
}

func ignoreErrors(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.FailurePolicy = v1alpha1.FailurePolicyIgnore }

func audit(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Mode = v1alpha1.PolicyModeAudit }

func vmSelector(labels map[string]string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) {
		p.Spec.Match.VMSelector = &metav1.LabelSelector{MatchLabels: labels}
	}
}

func namespaceSelector(labels map[string]string) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) {
		p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: labels}
	}
}

func networks(nets ...v1alpha1.NetworkSelector) policyOption {
	return func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Match.Networks = nets }
}

// setOf compiles the policies into a Set whose built-in fallback is the shipped default.
func setOf(t testing.TB, c *evaluator.Compiler, ps ...*v1alpha1.ClusterIPAMPolicy) *evaluator.Set {
	t.Helper()
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	compiled := make([]*evaluator.Policy, len(ps))
	for i, p := range ps {
		compiled[i] = mustCompile(t, c, p)
	}
	return evaluator.NewSet(compiled, mustCompile(t, c, b))
}

// decide evaluates in with a fresh context and no options.
func decide(s *evaluator.Set, in evaluator.Input) evaluator.Decision {
	return s.Decide(context.Background(), in, evaluator.Options{})
}

// explain evaluates in with a fresh context and Options.Explain.
func explain(s *evaluator.Set, in evaluator.Input) evaluator.Decision {
	return s.Decide(context.Background(), in, evaluator.Options{Explain: true})
}

// withAnnotation is pooledAuto whose VM has annotation a = value.
func withAnnotation(value string) evaluator.Input {
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"a": value}
	return in
}
