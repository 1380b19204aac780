package vm

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func runtimeScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sdnv1.AddToScheme, vmv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// compiledSet is the shipped default as the built-in layer under the given policies.
func compiledSet(t *testing.T, layers ...*v1alpha1.ClusterIPAMPolicy) *evaluator.Set {
	t.Helper()
	return compiledSetWith(t, evaluator.Limits{}, layers...)
}

// compiledSetWith is compiledSet under the given limits.
func compiledSetWith(t *testing.T, limits evaluator.Limits, layers ...*v1alpha1.ClusterIPAMPolicy) *evaluator.Set {
	t.Helper()
	c, err := evaluator.NewCompiler(limits)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	builtin, errs := c.Compile(b, b)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	compiled := make([]*evaluator.Policy, len(layers))
	for i, p := range layers {
		if compiled[i], errs = c.Compile(p, nil); len(errs) > 0 {
			t.Fatal(errs)
		}
	}
	return evaluator.NewSet(compiled, builtin)
}

// slowSet decides with a policy whose matchCondition runs until the evaluator's deadline
// (a million-iteration comprehension under cost limits raised out of the way): every
// interface takes at least the deadline.
func slowSet(t *testing.T, deadline time.Duration) *evaluator.Set {
	t.Helper()
	return compiledSetWith(t, evaluator.Limits{Deadline: deadline, StaticCostLimit: 1e12, PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12, ComprehensionRange: 1e12},
		&v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
			MatchConditions: []v1alpha1.NamedExpression{{Name: "spin",
				Expression: "lists.range(1000).all(x, lists.range(1000).all(y, x + y >= 0))"}},
			Allocation: &v1alpha1.Expression{Expression: "'Auto'"}}})
}

type staticSet struct{ set *evaluator.Set }

func (s staticSet) Set() *evaluator.Set { return s.set }

func builtinSet(t *testing.T) PolicySource { return staticSet{compiledSet(t)} }
