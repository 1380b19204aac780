package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/internal/manifest"
)

// fieldOwner is the server-side-apply field manager of the sandbox.
const fieldOwner = "vmipam-sandbox"

// kindOrder applies dependencies first, so that objects appear in a realistic order.
var kindOrder = []string{"Namespace", "ClusterIPAMPolicy", "ClusterIPAddressPool", "IPAddressPool",
	"ClusterNetwork", "Network", "IPAddress", "VirtualMachine", "VirtualMachineOperation"}

// Apply server-side-applies every object of the YAML files in fsys matching pattern.
func Apply(ctx context.Context, c client.Client, fsys fs.FS, pattern string) error {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		docs, err := decode(data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, docs...)
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return slices.Index(kindOrder, a.GetKind()) - slices.Index(kindOrder, b.GetKind())
	})
	for _, o := range objs {
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

func decode(data []byte) ([]*unstructured.Unstructured, error) {
	docs, err := manifest.Split(data)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(docs))
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(doc.JSON, &u.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc.Index, err)
		}
		out = append(out, u)
	}
	return out, nil
}
