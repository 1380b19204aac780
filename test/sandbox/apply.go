package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
