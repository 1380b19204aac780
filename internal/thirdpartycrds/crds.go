package thirdpartycrds

import (
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmipam/vmipam/crds"
)

//go:embed *.yaml
var files embed.FS

// Trimmed returns the trimmed SDN and virtualization CRDs.
func Trimmed() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crds.Load(files, "internal/thirdpartycrds", "*.yaml")
}

// WithOurs returns vmipam's own CRDs (crds.Ours) and the trimmed ones together: every kind
// vmipam reads.
func WithOurs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ours, err := crds.Ours()
	if err != nil {
		return nil, err
	}
	theirs, err := Trimmed()
	return append(ours, theirs...), err
}
