package evaluator

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// MaxPolicySourceBytes bounds the bytes of CEL source one policy's expressions hold together
// (variables, matchConditions, allocation, skip rules with their messageExpressions,
// hotplug): the CRD bounds each expression and each list, but not their product.
const MaxPolicySourceBytes = cost.MaxPolicySourceBytes

// sourceSize refuses a spec whose expressions hold more than MaxPolicySourceBytes together,
// at spec; it is checked before anything is compiled, for a stored policy too (the controller
// reports it as not compiling, as any other), so that no policy can cost more than the
// bound's compile time per generation the controller reads.
func sourceSize(spec *field.Path, s *v1alpha1.ClusterIPAMPolicySpec) *field.Error {
	total := SourceBytes(s)
	if total <= MaxPolicySourceBytes {
		return nil
	}
	return field.Forbidden(spec, fmt.Sprintf("the policy's CEL expressions hold %d bytes together, beyond the %d one policy may hold "+
		"(compiling takes time in proportion): split it into several policies, or compute shared parts once in variables",
		total, MaxPolicySourceBytes))
}

// SourceBytes is the bytes of CEL source the expressions of s hold together, as
// MaxPolicySourceBytes counts them: the dry run bounds the sum over a request's policies.
func SourceBytes(s *v1alpha1.ClusterIPAMPolicySpec) int {
	total := 0
	for _, e := range storedExpressions(&v1alpha1.ClusterIPAMPolicy{Spec: *s}) {
		total += len(e)
	}
	return total
}
