package policies

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	sigsjson "sigs.k8s.io/json"

	"github.com/vmipam/vmipam/crds"
	"github.com/vmipam/vmipam/internal/crdschema"
	"github.com/vmipam/vmipam/internal/manifest"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

//go:embed *.yaml
var defaultFiles embed.FS

// BuiltinName is the name of the shipped policy that also serves as the built-in fallback.
const BuiltinName = "default"

// Defaults returns the shipped default policies, sorted by name. Each call returns fresh
// copies the caller may modify. It fails only if the embedded YAML is broken, which the
// package's tests rule out.
func Defaults() ([]v1alpha1.ClusterIPAMPolicy, error) {
	names, err := fs.Glob(defaultFiles, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]v1alpha1.ClusterIPAMPolicy, 0, len(names))
	for _, name := range names {
		data, err := defaultFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		docs, err := Decode(data)
		if err != nil {
			return nil, fmt.Errorf("policies/%s: %w", name, err)
		}
		out = append(out, docs...)
	}
	return out, nil
}

// Builtin returns the shipped policy named BuiltinName.
func Builtin() (*v1alpha1.ClusterIPAMPolicy, error) {
	all, err := Defaults()
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].Name == BuiltinName {
			return &all[i], nil
		}
	}
	return nil, fmt.Errorf("no shipped policy named %q", BuiltinName)
}

// Decode reads every ClusterIPAMPolicy document of a YAML or JSON stream (documents separated
// by "---"; empty and comment-only ones are skipped). Unknown fields, a field name in another
// case and a key given twice are errors, so that a misspelled key is reported, not dropped; documents of another kind are errors too. Errors
// name the document's index (from 0). Nulls are dropped and defaults filled from the
// ClusterIPAMPolicy CRD's schema, as the API server does (an absent spec.priority is 100), so
// that files order like the installed objects.
func Decode(data []byte) ([]v1alpha1.ClusterIPAMPolicy, error) {
	docs, err := manifest.Split(data)
	if err != nil {
		return nil, err
	}
	out := make([]v1alpha1.ClusterIPAMPolicy, 0, len(docs))
	for _, doc := range docs {
		js, err := applySchema(doc.JSON)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc.Index, err)
		}
		var p v1alpha1.ClusterIPAMPolicy
		strict, err := sigsjson.UnmarshalStrict(js, &p) // case-sensitive, as the API server reads
		if err = errors.Join(append([]error{err}, strict...)...); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc.Index, err)
		}
		if p.Kind != "ClusterIPAMPolicy" || p.APIVersion != v1alpha1.GroupVersion.String() {
			return nil, fmt.Errorf("document %d: kind %q apiVersion %q, want ClusterIPAMPolicy %s",
				doc.Index, p.Kind, p.APIVersion, v1alpha1.GroupVersion)
		}
		out = append(out, p)
	}
	return out, nil
}

// policySchemas are the structural schemas of vmipam's CRDs, loaded once.
var policySchemas = sync.OnceValues(func() (crdschema.Schemas, error) {
	ours, err := crds.Ours()
	if err != nil {
		return nil, err
	}
	return crdschema.Load(ours)
})

// applySchema drops the nulls and fills the defaults of a ClusterIPAMPolicy document (JSON)
// as the API server would; a document of another kind is returned as is.
func applySchema(js []byte) ([]byte, error) {
	schemas, err := policySchemas()
	if err != nil {
		return nil, fmt.Errorf("loading the ClusterIPAMPolicy CRD: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil || obj == nil {
		return js, nil // UnmarshalStrict reports it
	}
	schemas.Apply(v1alpha1.GroupVersion.WithKind("ClusterIPAMPolicy"), obj)
	return json.Marshal(obj)
}
