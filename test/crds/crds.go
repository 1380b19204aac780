package crds

import (
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/vmipam/vmipam/crds"
	"github.com/vmipam/vmipam/internal/thirdpartycrds"
)

//go:embed standin/*.yaml
var standIn embed.FS

// StandIn returns the CRDs of the stand-ins' own kinds: the KubeVirt VirtualMachine the
// virtualization-controller stand-in keeps its next-boot template in (test/crds/standin).
func StandIn() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crds.Load(standIn, "test/crds", "standin/*.yaml")
}

// ThirdParty returns the trimmed SDN and virtualization CRDs (internal/thirdpartycrds).
func ThirdParty() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return thirdpartycrds.Trimmed()
}

// All returns vmipam's own CRDs (crds.Ours), ThirdParty and StandIn together: what a test
// cluster needs.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ours, err := thirdpartycrds.WithOurs()
	if err != nil {
		return nil, err
	}
	standIn, err := StandIn()
	return append(ours, standIn...), err
}
