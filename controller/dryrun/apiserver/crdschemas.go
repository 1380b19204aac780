package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	"github.com/vmipam/vmipam/controller/dryrun"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/internal/crdschema"
	policyv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

// crdSchemaTTL is how long a CRD's schema read from the cluster is used before it is read
// again: CRDs change rarely, and an evaluation should not cost a large GET per manifest.
const crdSchemaTTL = time.Minute

// clusterSchemas are the structural schemas of the CRDs installed in the cluster — the real
// VirtualMachine and SDN CRDs, not the trimmed copies vmipam's own decoder knows —, read on
// demand and kept for crdSchemaTTL. They find the unknown fields of the manifests in a spec
// exactly as the API server would when the manifest is applied. Only the kinds an Evaluation
// may carry (known) are ever looked up, so the cache holds at most one entry per such kind
// and a made-up apiVersion/kind costs no request to the API server.
type clusterSchemas struct {
	reader client.Reader // uncached: the manager does not watch CRDs
	now    func() time.Time
	// known says whether gvk is a kind an Evaluation may carry (spec.vm, spec.policies,
	// spec.objects); nil: none.
	known func(gvk schema.GroupVersionKind) bool

	mu     sync.Mutex
	cached map[string]cachedSchema // by CRD name
}

// newClusterSchemas reads the CRDs of the kinds an Evaluation may carry with reader.
func newClusterSchemas(reader client.Reader) *clusterSchemas {
	return &clusterSchemas{reader: reader, now: time.Now, known: evaluatedKind, cached: map[string]cachedSchema{}}
}

// evaluatedKind says whether gvk is a kind an Evaluation may carry: the VirtualMachine of
// spec.vm, the ClusterIPAMPolicy of spec.policies, the overlay kinds of spec.objects.
func evaluatedKind(gvk schema.GroupVersionKind) bool {
	return gvk == vmv1.GroupVersion.WithKind("VirtualMachine") || gvk == policyv1.GroupVersion.WithKind("ClusterIPAMPolicy") ||
		dryrun.OverlayKind(gvk)
}

type cachedSchema struct {
	schemas crdschema.Schemas // nil: no such CRD (a built-in kind, or not installed)
	read    time.Time
}

// forKind returns the structural schema of gvk, nil when the cluster has no CRD for it.
func (c *clusterSchemas) forKind(ctx context.Context, gvk schema.GroupVersionKind) (*structuralschema.Structural, error) {
	if gvk.Group == "" || gvk.Kind == "" || c.known == nil || !c.known(gvk) {
		return nil, nil // a built-in kind (no CRD), or one DecodeBody refuses: nothing to read
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	name := plural.Resource + "." + gvk.Group
	c.mu.Lock()
	hit, ok := c.cached[name]
	c.mu.Unlock()
	if !ok || c.now().Sub(hit.read) > crdSchemaTTL {
		u := &unstructured.Unstructured{} // the manager's scheme need not know CRDs
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := c.reader.Get(ctx, client.ObjectKey{Name: name}, u)
		if err == nil {
			err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd)
		}
		switch {
		case apierrors.IsNotFound(err):
			hit = cachedSchema{read: c.now()}
		case err != nil:
			return nil, fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		default:
			s, err := crdschema.Load([]*apiextensionsv1.CustomResourceDefinition{crd})
			if err != nil {
				return nil, err
			}
			hit = cachedSchema{schemas: s, read: c.now()}
		}
		c.mu.Lock()
		c.cached[name] = hit
		c.mu.Unlock()
	}
	return hit.schemas[gvk], nil
}

// prune drops the fields of the manifest raw (at path) that its kind's CRD does not declare,
// and those of its metadata that ObjectMeta does not (a CRD's schema leaves metadata open:
// the API server decodes it as ObjectMeta, for built-in kinds too), and returns the manifest
// without them and their paths. A manifest that is not an object, or of a kind an
// Evaluation may not carry, is returned as it is.
func (c *clusterSchemas) prune(ctx context.Context, path *field.Path, raw json.RawMessage, defaultGVK schema.GroupVersionKind) (json.RawMessage, []string, error) {
	var obj map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil || obj == nil {
		return raw, nil, nil // DecodeBody reports it
	}
	gvk := defaultGVK
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion != "" || kind != "" {
		gvk = schema.FromAPIVersionAndKind(apiVersion, kind)
	}
	if c.known == nil || !c.known(gvk) {
		return raw, nil, nil // DecodeBody refuses the kind
	}
	unknown := pruneMetadata(path, obj)
	s, err := c.forKind(ctx, gvk)
	if err != nil {
		return raw, nil, err
	}
	if s != nil {
		unknown = append(unknown, structuralpruning.PruneWithOptions(obj, s, true,
			structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true, ParentPath: []string{path.String()}})...)
	}
	if len(unknown) == 0 {
		return raw, nil, nil
	}
	pruned, err := json.Marshal(obj)
	return pruned, unknown, err
}

// pruneMetadata drops the fields of obj's metadata that ObjectMeta does not declare and
// returns their paths below path (spec.vm.metadata.bogus), with the API server's own
// decoding of a custom resource's metadata. Metadata that does not decode (a value of the
// wrong type) is left as it is, for DecodeBody to report at its path.
func pruneMetadata(path *field.Path, obj map[string]any) []string {
	meta, found, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true, ParentPath: path})
	if err != nil || !found || len(unknown) == 0 {
		return nil
	}
	if err := schemaobjectmeta.SetObjectMeta(obj, meta); err != nil {
		return nil
	}
	return unknown
}
