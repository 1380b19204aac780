package apiserver

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// specSchema checks a received spec as the API server checks a custom resource against its
// CRD's schema: unknown fields are pruned and reported by the request's fieldValidation, and
// values of the wrong type are 422s naming their field. The schema is Evaluation's generated
// one (the same the server publishes as OpenAPI).
type specSchema struct {
	structural *structuralschema.Structural
	validator  validation.SchemaValidator
}

func loadSpecSchema() (*specSchema, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(dryrunv1.SchemaDocument(), crd); err != nil || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil {
		return nil, fmt.Errorf("the generated Evaluation schema: %v", err)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, fmt.Errorf("the generated Evaluation schema is not structural: %w", err)
	}
	validator, _, err := validation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	return &specSchema{structural: structural, validator: validator}, nil
}

// check validates the JSON of a spec; problem is why it did not decode into the typed spec
// (empty when it did). It returns the problems (422) and the warnings to send, by mode.
func (s *specSchema) check(data []byte, problem, mode string) (field.ErrorList, []string) {
	var spec any
	strict, err := sigsjson.UnmarshalStrict(data, &spec, sigsjson.DisallowDuplicateFields)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), field.OmitValueType{}, err.Error())}, nil
	}
	if fields, ok := spec.(map[string]any); ok {
		for k, v := range fields {
			if v == nil { // policies: null is no policies, as the API server drops a custom resource's nulls
				delete(fields, k)
			}
		}
	}
	obj := map[string]any{"apiVersion": dryrunv1.SchemeGroupVersion.String(), "kind": dryrunv1.Kind, "metadata": map[string]any{}, "spec": spec}
	unknown := structuralpruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	errs, warnings := byFieldValidation(duplicates(strict), "duplicate field", mode)
	moreErrs, moreWarnings := byFieldValidation(unknown, "unknown field", mode)
	errs, warnings = append(errs, moreErrs...), append(warnings, moreWarnings...)
	errs = append(errs, validation.ValidateCustomResource(nil, obj, s.validator)...)
	if len(errs) == 0 && problem != "" { // the schema missed what the decoder saw: still name the spec
		errs = append(errs, field.Invalid(field.NewPath("spec"), field.OmitValueType{}, problem))
	}
	return errs, warnings
}

// duplicates are the paths below spec (spec.vm.metadata.name) of the keys the spec's JSON
// repeats, from the strict decoder's errors (`duplicate field "vm.metadata.name"`, relative
// to the spec).
func duplicates(strict []error) []string {
	const prefix = "duplicate field "
	var paths []string
	for _, err := range strict {
		msg := err.Error()
		if !strings.HasPrefix(msg, prefix) {
			continue
		}
		if p, uerr := strconv.Unquote(strings.TrimPrefix(msg, prefix)); uerr == nil {
			paths = append(paths, "spec."+p)
		}
	}
	return paths
}

// byFieldValidation answers fields that are what (an "unknown field" or a "duplicate
// field"; paths such as spec.vm.spec.networks[0].bogus) as the API server answers them in a
// custom resource: under Strict they are errors, under Warn (the default when a client asks
// nothing) warnings, under Ignore nothing. A duplicated key's last value is the one used.
func byFieldValidation(paths []string, what, mode string) (field.ErrorList, []string) {
	var (
		errs     field.ErrorList
		warnings []string
	)
	for _, path := range paths {
		switch mode {
		case metav1.FieldValidationStrict:
			errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{},
				Detail: fmt.Sprintf("%s %q", what, path)})
		case metav1.FieldValidationIgnore:
		default:
			warnings = append(warnings, fmt.Sprintf("%s %q", what, path))
		}
	}
	return errs, warnings
}
