package dryrun

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	testcrds "github.com/vmipam/vmipam/test/crds"
)

// schemas validates objects of the custom kinds against the OpenAPI schemas of their CRDs,
// as the API server would on create: types, enums, required fields, lengths, patterns. The
// schemas are ours and the trimmed third-party ones (test/crds, generated from the Go types
// vmipam reads; not installable, but the best offline description of those kinds — the
// controller could check against the cluster's CRDs instead); a field the trimmed schema does
// not know is not an error, since the real CRD may have it.
type schemas map[schema.GroupVersionKind]validation.SchemaValidator

func loadSchemas() (schemas, error) {
	all, err := testcrds.All()
	if err != nil {
		return nil, fmt.Errorf("loading CRDs: %w", err)
	}
	out := schemas{}
	for _, crd := range all {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			val, err := newValidator(v.Schema.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("schema of %s %s: %w", crd.Name, v.Name, err)
			}
			out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = val
		}
	}
	return out, nil
}

func newValidator(props *apiextensionsv1.JSONSchemaProps) (validation.SchemaValidator, error) {
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, internal, nil); err != nil {
		return nil, err
	}
	val, _, err := validation.NewSchemaValidator(internal)
	return val, err
}

// validate checks obj (decoded JSON) against the schema of gvk, if there is one; errors are
// reported below path.
func (s schemas) validate(path *field.Path, gvk schema.GroupVersionKind, obj map[string]any) field.ErrorList {
	val, ok := s[gvk]
	if !ok {
		return nil
	}
	return validation.ValidateCustomResource(path, obj, val)
}
