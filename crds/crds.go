package crds

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml thirdparty/*.yaml
var files embed.FS

// Ours returns vmipam's own CRDs.
func Ours() ([]*apiextensionsv1.CustomResourceDefinition, error) { return load("*.yaml") }

// ThirdParty returns the trimmed SDN and virtualization CRDs.
func ThirdParty() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load("thirdparty/*.yaml")
}

// All returns Ours and ThirdParty together.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	ours, err := Ours()
	if err != nil {
		return nil, err
	}
	theirs, err := ThirdParty()
	return append(ours, theirs...), err
}

func load(pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, pattern)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("crds/%s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
