package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Validator rejects ClusterIPAMPolicies that do not compile.
type Validator struct {
	// Compiler must be the one the policy controller uses, so that the webhook and the
	// controller agree on what compiles (environment and cost limits).
	Compiler *evaluator.Compiler
}

var _ admission.Validator[*v1alpha1.ClusterIPAMPolicy] = (*Validator)(nil)

// SetupWebhookWithManager registers the validating webhook for ClusterIPAMPolicy at Path on
// mgr's webhook server. compiler must be the policy controller's (Registry.Compiler()).
func SetupWebhookWithManager(mgr ctrl.Manager, compiler *evaluator.Compiler) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ClusterIPAMPolicy{}).
		WithValidator(&Validator{Compiler: compiler}).
		WithValidatorCustomPath(Path).
		Complete()
}

// ValidateCreate compiles every expression as new.
func (v *Validator) ValidateCreate(_ context.Context, p *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	return nil, v.validate(p, nil)
}

// ValidateUpdate compiles the new spec against the old one (unchanged expressions compile
// as stored); an update that does not change the spec is allowed as it is.
func (v *Validator) ValidateUpdate(_ context.Context, old, p *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return nil, v.validate(p, old)
}

// ValidateDelete allows every deletion.
func (v *Validator) ValidateDelete(context.Context, *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	return nil, nil
}

// validate returns an Invalid API error carrying every compile error with its field path, so
// that kubectl prints one line per problem.
func (v *Validator) validate(p, old *v1alpha1.ClusterIPAMPolicy) error {
	if _, errs := v.Compiler.Compile(p, old); len(errs) > 0 {
		return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("ClusterIPAMPolicy").GroupKind(), p.Name, errs)
	}
	return nil
}
