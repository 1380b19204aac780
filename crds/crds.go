package crds

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Ours returns vmipam's own CRDs: the ones users install.
func Ours() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return Load(files, "crds", "*.yaml")
}

// Load decodes every file of fsys matching pattern (fs.Glob) as one CRD, strictly: an unknown
// field is an error naming dir/file. The CRDs come in the order of their file names.
func Load(fsys fs.FS, dir, pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
