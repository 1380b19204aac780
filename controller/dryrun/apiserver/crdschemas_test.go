package apiserver

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Unknown fields of a manifest's metadata are found and dropped as the API server finds and
// drops them (ObjectMeta's decoding), for a built-in kind of spec.objects too, where no CRD
// is read; metadata of the wrong type is left for the decoder to report at its path. Before,
// they were accepted silently whatever the request's fieldValidation.
func TestPruneDropsUnknownMetadataFields(t *testing.T) {
	c := &clusterSchemas{known: evaluatedKind} // no reader: a built-in kind reads no CRD
	pod := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	raw := json.RawMessage(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "bogus": 1,
		"ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u", "extra": true}]}}`)
	pruned, unknown, err := c.prune(context.Background(), field.NewPath("spec", "objects").Index(0), raw, pod)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(unknown)
	want := []string{"spec.objects[0].metadata.bogus", "spec.objects[0].metadata.ownerReferences[0].extra"}
	if !slices.Equal(unknown, want) {
		t.Errorf("unknown = %q, want %q", unknown, want)
	}
	var obj struct {
		Metadata map[string]any `json:"metadata"`
	}
	if err := json.Unmarshal(pruned, &obj); err != nil {
		t.Fatal(err)
	}
	if _, ok := obj.Metadata["bogus"]; ok || obj.Metadata["name"] != "p" || len(obj.Metadata["ownerReferences"].([]any)) != 1 {
		t.Errorf("pruned metadata = %v, want bogus dropped and the rest kept", obj.Metadata)
	}

	wrongType := json.RawMessage(`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": 1}, "bogus": 1}}`)
	if out, unknown, err := c.prune(context.Background(), field.NewPath("spec", "objects").Index(0), wrongType, pod); err != nil ||
		len(unknown) != 0 || string(out) != string(wrongType) {
		t.Errorf("metadata of the wrong type: %s %q %v, want it left to the decoder", out, unknown, err)
	}
}
