package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// newTestRegistry returns a registry over a compiler with the default limits.
func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	c, err := evaluator.NewCompiler(evaluator.Limits{})
	if err != nil {
		t.Fatalf("NewCompiler: %v", err)
	}
	r, err := NewRegistry(c)
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	return r
}

// goodSpec compiles: every interface is skipped with reason Held.
func goodSpec() v1alpha1.ClusterIPAMPolicySpec {
	return v1alpha1.ClusterIPAMPolicySpec{
		Priority:   10,
		Allocation: &v1alpha1.Expression{Expression: "'Auto'"},
		SkipRules: []v1alpha1.SkipRule{{Name: "hold", Expression: "true", Reason: "Held",
			Message: "held by policy"}},
	}
}

// badSpec is goodSpec with the classic typo in skipRules[0] and a non-bool hotplug.
func badSpec() v1alpha1.ClusterIPAMPolicySpec {
	s := goodSpec()
	s.SkipRules[0].Expression = "ipAdress.exists"
	s.Hotplug = &v1alpha1.Expression{Expression: "'yes'"}
	return s
}

// policyObj builds a stored ClusterIPAMPolicy.
func policyObj(name string, uid types.UID, generation int64, spec v1alpha1.ClusterIPAMPolicySpec) *v1alpha1.ClusterIPAMPolicy {
	return &v1alpha1.ClusterIPAMPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ClusterIPAMPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Generation: generation},
		Spec:       spec,
	}
}
