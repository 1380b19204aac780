package crds

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmipam/vmipam/internal/thirdpartycrds"
)

// ThirdParty returns the trimmed SDN and virtualization CRDs (internal/thirdpartycrds).
func ThirdParty() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return thirdpartycrds.Trimmed()
}

// All returns vmipam's own CRDs (crds.Ours) and ThirdParty together: what a test cluster needs.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return thirdpartycrds.WithOurs()
}
