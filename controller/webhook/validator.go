package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Validator rejects ClusterIPAMPolicies that do not compile, and warns about what compiles
// but is probably not meant (evaluator.Compiler.Lint), and about skip rules that replace, or
// are replaced by, a same-named rule of an installed policy (evaluator.ReplacedRules).
type Validator struct {
	// Compiler must be the one the policy controller uses, so that the webhook and the
	// controller agree on what compiles (environment and cost limits).
	Compiler *evaluator.Compiler
	// Reader lists the installed policies for the replacement warnings; nil: only the
	// shipped default is compared with.
	Reader client.Reader
}

var _ admission.Validator[*v1alpha1.ClusterIPAMPolicy] = (*Validator)(nil)

// SetupWebhookWithManager registers the validating webhook for ClusterIPAMPolicy at Path on
// mgr's webhook server. compiler must be the policy controller's (Registry.Compiler()).
func SetupWebhookWithManager(mgr ctrl.Manager, compiler *evaluator.Compiler) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ClusterIPAMPolicy{}).
		WithValidator(&Validator{Compiler: compiler, Reader: mgr.GetClient()}).
		WithValidatorCustomPath(Path).
		Complete()
}

// ValidateCreate compiles every expression as new.
func (v *Validator) ValidateCreate(ctx context.Context, p *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	return v.validate(ctx, p, nil)
}

// ValidateUpdate compiles the new spec against the old one (unchanged expressions compile
// as stored); an update that does not change the spec is allowed as it is.
func (v *Validator) ValidateUpdate(ctx context.Context, old, p *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, p.Spec) {
		return nil, nil
	}
	return v.validate(ctx, p, old)
}

// validate compiles and lints p in one pass (evaluator.Compiler.CompileAndLint: each
// expression type-checked once). A policy that does not compile is refused with an Invalid
// API error carrying every compile error with its field path, so that kubectl prints one
// line per problem; one that compiles is admitted with its lint warnings and its replaced
// rules among the installed policies. A failed list only loses the replacement warnings:
// warnings never decide admission.
func (v *Validator) validate(ctx context.Context, p, old *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	_, errs, lint := v.Compiler.CompileAndLint(p, old)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("ClusterIPAMPolicy").GroupKind(), p.Name, errs)
	}
	var installed v1alpha1.ClusterIPAMPolicyList
	if v.Reader != nil {
		_ = v.Reader.List(ctx, &installed)
	}
	var out admission.Warnings
	for _, w := range append(lint, evaluator.ReplacedRules(p, installed.Items)...) {
		out = append(out, w.String())
	}
	return out, nil
}

// ValidateDelete allows every deletion.
func (v *Validator) ValidateDelete(context.Context, *v1alpha1.ClusterIPAMPolicy) (admission.Warnings, error) {
	return nil, nil
}
