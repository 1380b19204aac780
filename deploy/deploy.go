package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/vmipam/vmipam/internal/manifest"
)

// ChartDir is the chart's directory, relative to this package.
const ChartDir = "helm/vmipam"

//go:embed all:helm/vmipam
var chartFS embed.FS

// KubeVersion is the Kubernetes version charts are rendered for: the envtest API server's.
const KubeVersion = "v1.37.2"

// Chart loads the chart (a fresh copy on every call).
func Chart() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(chartFS, ChartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := chartFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := strings.CutPrefix(p, ChartDir+"/")
		files = append(files, &loader.BufferedFile{Name: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(files)
}

// Template renders the chart as `helm template release chart --namespace namespace` with
// values over the chart's defaults: the values are checked against values.schema.json, and
// the manifests come in Helm's install order, as one multi-document YAML stream.
func Template(release, namespace string, values map[string]any) (string, error) {
	c, err := Chart()
	if err != nil {
		return "", err
	}
	kv, err := chartutil.ParseKubeVersion(KubeVersion)
	if err != nil {
		return "", err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = release, namespace, kv
	install.IncludeCRDs = true
	rel, err := install.Run(c, values)
	if err != nil {
		return "", fmt.Errorf("rendering %s: %w", path.Base(ChartDir), err)
	}
	return rel.Manifest, nil
}

// Objects is Template decoded: the rendered objects in Helm's install order.
func Objects(release, namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	rendered, err := Template(release, namespace, values)
	if err != nil {
		return nil, err
	}
	docs, err := manifest.Split([]byte(rendered))
	if err != nil {
		return nil, err
	}
	objs := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(d.JSON); err != nil {
			return nil, fmt.Errorf("rendered document %d: %w", d.Index, err)
		}
		objs = append(objs, u)
	}
	return objs, nil
}
