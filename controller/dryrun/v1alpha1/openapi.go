package v1alpha1

import _ "embed" // the generated schema

// schemaDocument is the CustomResourceDefinition-shaped document controller-gen writes with
// the OpenAPI v3 schema of Evaluation (see the package documentation).
//
//go:embed openapi/dryrun.ipam.virtualization.deckhouse.io_evaluations.yaml
var schemaDocument []byte

// SchemaDocument returns the generated document holding Evaluation's OpenAPI v3 schema
// (spec.versions[0].schema.openAPIV3Schema), in YAML.
func SchemaDocument() []byte { return schemaDocument }

// OpenAPIModelName is the name of Evaluation's definition in the served OpenAPI documents,
// in the reversed-group form Kubernetes uses (io.k8s.api.core.v1.Pod).
func (Evaluation) OpenAPIModelName() string {
	return "io.deckhouse.virtualization.ipam.dryrun.v1alpha1.Evaluation"
}
