package apiserver

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/yaml"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// definitions are the OpenAPI definitions the server publishes: the meta/v1 types (ObjectMeta,
// Status, discovery) as generated for the apiextensions API server, which serves them too,
// and Evaluation from the schema controller-gen derived from its Go types.
func definitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := generatedopenapi.GetOpenAPIDefinitions(ref)
	def, err := evaluationDefinition(ref)
	if err != nil {
		panic(err) // the embedded schema is checked by this package's tests
	}
	defs[dryrunv1.Evaluation{}.OpenAPIModelName()] = def
	return defs
}

// evaluationDefinition is Evaluation's generated schema with metadata referring to
// ObjectMeta (the generated document, being a CRD's, leaves it a bare object).
func evaluationDefinition(ref common.ReferenceCallback) (common.OpenAPIDefinition, error) {
	s, err := loadEvaluationSchema() // parsed per call: the builder asks once per document
	if err != nil {
		return common.OpenAPIDefinition{}, err
	}
	objectMeta := metav1.ObjectMeta{}.OpenAPIModelName()
	md := s.Properties["metadata"]
	md.Type, md.Ref = nil, ref(objectMeta)
	s.Properties["metadata"] = md
	status := s.Properties["status"]
	outputOnly(&status)
	s.Properties["status"] = status
	return common.OpenAPIDefinition{Schema: s, Dependencies: []string{objectMeta}}, nil
}

func loadEvaluationSchema() (spec.Schema, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(dryrunv1.SchemaDocument(), crd); err != nil {
		return spec.Schema{}, fmt.Errorf("the generated Evaluation schema: %w", err)
	}
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Schema == nil || crd.Spec.Versions[0].Schema.OpenAPIV3Schema == nil {
		return spec.Schema{}, fmt.Errorf("the generated Evaluation schema has no single version with an OpenAPI v3 schema")
	}
	data, err := json.Marshal(crd.Spec.Versions[0].Schema.OpenAPIV3Schema)
	if err != nil {
		return spec.Schema{}, err
	}
	var s spec.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return spec.Schema{}, fmt.Errorf("the generated Evaluation schema: %w", err)
	}
	return s, nil
}

// outputOnly drops the required fields of a status schema and all below it. The status is
// the server's answer: a client never writes it, and the server ignores what a request
// carries there; but kubectl validates a whole object against the schema, and the Go types
// (the evaluator's and the controller's, whose fields are required in their answers) would
// make it refuse an Evaluation serialized with an empty status.
func outputOnly(s *spec.Schema) {
	s.Required = nil
	for name, p := range s.Properties {
		outputOnly(&p)
		s.Properties[name] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		outputOnly(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		outputOnly(s.AdditionalProperties.Schema)
	}
}
