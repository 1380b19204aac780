package cacheindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
)

// Indexer registers field indexes on a controller-runtime cache's informers as the
// cache's own IndexField does — the same index names and keys, so that client.MatchingFields
// lookups through the cache find them — but stores a namespaced object's value under one
// key: its namespaced one, or "__all_namespaces" when the value is looked up across
// namespaces (index.ClusterWide).
// controller-runtime stores every value twice, namespaced and under "__all_namespaces", and
// at 10,000 VMs those index sets were the largest share of the controller's heap (26% of
// the in-use profile, docs/BENCHMARKS.md); vmipam looks across namespaces only for the VMs
// of a ClusterNetwork and in the buckets of one VM's own objects.
type Indexer struct {
	// Cache is the manager's cache (manager.Manager.GetCache()).
	Cache cache.Informers
}

var _ client.FieldIndexer = Indexer{}

// IndexField implements client.FieldIndexer: it adds the index named field to obj's
// informer (without waiting for it to sync), keyed by fn's values.
func (c Indexer) IndexField(ctx context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	informer, err := c.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return informer.AddIndexers(toolscache.Indexers{fieldIndexName(field): indexFunc(field, fn)})
}

// The index names and key layout of controller-runtime's cache reader
// (sigs.k8s.io/controller-runtime/pkg/cache/internal: FieldIndexName, KeyToNamespacedKey),
// which its List uses to answer client.MatchingFields: "field:<field>" indexes keys
// "<namespace>/<value>", or "__all_namespaces/<value>" for a lookup without a namespace.
// They are internal there; TestCacheIndexerAnswersTheCacheReader holds them to it.
const (
	fieldIndexPrefix = "field:"
	allNamespaces    = "__all_namespaces"
)

func fieldIndexName(field string) string { return fieldIndexPrefix + field }

// indexFunc keys obj by fn's values: a namespaced object's under its namespace, or under
// "__all_namespaces" instead when index.ClusterWide; a cluster-scoped object's under
// "__all_namespaces" (as controller-runtime keys it).
func indexFunc(field string, fn client.IndexerFunc) toolscache.IndexFunc {
	return func(raw any) ([]string, error) {
		obj, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("index %s: object of type %T is not a client.Object", field, raw)
		}
		ns := obj.GetNamespace()
		values := fn(obj)
		keys := make([]string, 0, len(values))
		for _, v := range values {
			if ns == "" || index.ClusterWide(field, v) {
				keys = append(keys, allNamespaces+"/"+v)
			} else {
				keys = append(keys, ns+"/"+v)
			}
		}
		return keys, nil
	}
}
