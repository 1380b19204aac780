package reads

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podKind is the kind of launcher pods (core/v1 Pod), and podListKind of their lists.
var (
	podKind     = corev1.SchemeGroupVersion.WithKind("Pod")
	podListKind = corev1.SchemeGroupVersion.WithKind("PodList")
)

// NewCache is vmipam's manager cache (manager.Options.NewCache, with CacheOptions): the
// cache opts describe, except that pods — launcher pods, by CacheOptions' label selector —
// are watched and held as metadata only (metav1.PartialObjectMetadata, a metadata-only watch)
// behind the typed API, and only those that have not finished: NewCache adds the field
// selector status.phase!=Succeeded,status.phase!=Failed to opts' pod entry (or makes one).
// Everything vmipam reads of a pod is metadata but whether it has finished, and the selector
// answers that one: a pod that finishes leaves the cache (a delete event) as one that is
// deleted does, and the pods read from the cache are all unfinished.
//
// Readers and watches keep asking for corev1.Pod: a Get or List of pods is answered from the
// metadata, as pods with an empty spec and status (PodFromMetadata); GetInformer,
// GetInformerForKind, IndexField and RemoveInformer for pods reach the metadata informer, so a
// watch of &corev1.Pod{} receives *metav1.PartialObjectMetadata (Changed compares those). No
// typed pod informer is started, which is the point: a corev1.Pod is 1,240 bytes before
// anything is in it, and at 10,000 VMs the cached pods were the largest entry of the
// controller's heap (docs/BENCHMARKS.md). Managers the stand-ins share keep the default cache
// (typed pods, finished ones too: sim.CacheOptions), of which vmipam reads the same fields and
// checks the phase itself.
func NewCache(config *rest.Config, opts cache.Options) (cache.Cache, error) {
	opts.ByObject = withUnfinishedPods(opts.ByObject)
	c, err := cache.New(config, opts)
	if err != nil {
		return nil, err
	}
	return metadataPods{Cache: c}, nil
}

// withUnfinishedPods returns a copy of byObject whose pod entry also selects unfinished pods.
func withUnfinishedPods(byObject map[client.Object]cache.ByObject) map[client.Object]cache.ByObject {
	out := maps.Clone(byObject)
	if out == nil {
		out = map[client.Object]cache.ByObject{}
	}
	for obj, by := range out {
		if _, ok := obj.(*corev1.Pod); ok {
			by.Field = andSelector(by.Field, unfinished())
			out[obj] = by
			return out
		}
	}
	out[&corev1.Pod{}] = cache.ByObject{Field: unfinished()}
	return out
}

// andSelector is a and b, b alone when a is nil (no selector), a alone when it holds b's
// requirements already.
func andSelector(a, b fields.Selector) fields.Selector {
	if a == nil || a.Empty() {
		return b
	}
	if a.String() == b.String() {
		return a
	}
	return fields.AndSelectors(a, b)
}

// metadataPods is the cache of NewCache: Cache, with every request for corev1.Pod turned into
// one for its metadata.
type metadataPods struct {
	cache.Cache
}

// PodFromMetadata is the launcher pod NewCache's readers get for m: m's metadata (its maps
// and slices shared with m), kind core/v1 Pod, an empty spec and status — its phase unknown,
// but not Succeeded or Failed, which NewCache does not hold.
func PodFromMetadata(m *metav1.PartialObjectMetadata) corev1.Pod {
	return corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: podKind.GroupVersion().String(), Kind: podKind.Kind},
		ObjectMeta: m.ObjectMeta}
}

// podMetadata is the object a request for obj is turned into, or nil when obj is not a pod.
func podMetadata(obj client.Object) *metav1.PartialObjectMetadata {
	if _, ok := obj.(*corev1.Pod); !ok {
		return nil
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(podKind)
	return m
}

// Get implements client.Reader.
func (c metadataPods) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	m := podMetadata(obj)
	if m == nil {
		return c.Cache.Get(ctx, key, obj, opts...)
	}
	if err := c.Cache.Get(ctx, key, m, opts...); err != nil {
		return err
	}
	*obj.(*corev1.Pod) = PodFromMetadata(m)
	return nil
}

// List implements client.Reader.
func (c metadataPods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	pods, ok := list.(*corev1.PodList)
	if !ok {
		return c.Cache.List(ctx, list, opts...)
	}
	var m metav1.PartialObjectMetadataList
	m.SetGroupVersionKind(podListKind)
	if err := c.Cache.List(ctx, &m, opts...); err != nil {
		return err
	}
	pods.ListMeta = m.ListMeta
	pods.Items = make([]corev1.Pod, len(m.Items))
	for i := range m.Items {
		pods.Items[i] = PodFromMetadata(&m.Items[i])
	}
	return nil
}

// GetInformer implements cache.Informers.
func (c metadataPods) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if m := podMetadata(obj); m != nil {
		obj = m
	}
	return c.Cache.GetInformer(ctx, obj, opts...)
}

// GetInformerForKind implements cache.Informers.
func (c metadataPods) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if gvk == podKind {
		return c.GetInformer(ctx, &corev1.Pod{}, opts...)
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

// RemoveInformer implements cache.Informers.
func (c metadataPods) RemoveInformer(ctx context.Context, obj client.Object) error {
	if m := podMetadata(obj); m != nil {
		obj = m
	}
	return c.Cache.RemoveInformer(ctx, obj)
}

// IndexField implements client.FieldIndexer.
func (c metadataPods) IndexField(ctx context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	if m := podMetadata(obj); m != nil {
		obj = m
	}
	return c.Cache.IndexField(ctx, obj, field, fn)
}
