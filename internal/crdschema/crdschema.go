package crdschema

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Schemas holds the structural schema of every version of some CRDs, by group, version and
// kind.
type Schemas map[schema.GroupVersionKind]*structuralschema.Structural

// Load builds the structural schemas of crds; it fails on a schema that is not structural
// (the API server would refuse such a CRD).
func Load(crds []*apiextensionsv1.CustomResourceDefinition) (Schemas, error) {
	out := Schemas{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			internal := &apiextensions.JSONSchemaProps{}
			if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
				return nil, fmt.Errorf("schema of %s %s: %w", crd.Name, v.Name, err)
			}
			s, err := structuralschema.NewStructural(internal)
			if err != nil {
				return nil, fmt.Errorf("schema of %s %s is not structural: %w", crd.Name, v.Name, err)
			}
			out[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = s
		}
	}
	return out, nil
}

// Apply drops obj's nulls where the schema of gvk does not allow them and fills its
// defaults, in place and in the API server's order; an object of a kind without a schema is
// left as is.
func (s Schemas) Apply(gvk schema.GroupVersionKind, obj map[string]any) {
	st, ok := s[gvk]
	if !ok {
		return
	}
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, st)
	structuraldefaulting.Default(obj, st)
}
