package crds

import (
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmipam/vmipam/crds"
)

//go:embed *.yaml
var files embed.FS

// ThirdParty returns the trimmed SDN and virtualization CRDs.
func ThirdParty() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crds.Load(files, "test/crds", "*.yaml")
}

// All returns vmipam's own CRDs (crds.Ours) and ThirdParty together: what a test cluster needs.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ours, err := crds.Ours()
	if err != nil {
		return nil, err
	}
	theirs, err := ThirdParty()
	return append(ours, theirs...), err
}
