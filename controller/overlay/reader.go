package overlay

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Reader answers Get and List from its objects laid over a base reader. Register indexes and
// add objects before reading; after that it is safe for concurrent reads.
type Reader struct {
	base    client.Reader
	scheme  *runtime.Scheme
	objects map[schema.GroupVersionKind]map[types.NamespacedName]client.Object
	indexes map[schema.GroupVersionKind]map[string]client.IndexerFunc
}

var (
	_ client.Reader       = (*Reader)(nil)
	_ client.FieldIndexer = (*Reader)(nil)
)

// New returns a Reader over base; with a nil base only the added objects exist. scheme must
// know every kind that is added or read.
func New(base client.Reader, scheme *runtime.Scheme) *Reader {
	return &Reader{base: base, scheme: scheme,
		objects: map[schema.GroupVersionKind]map[types.NamespacedName]client.Object{},
		indexes: map[schema.GroupVersionKind]map[string]client.IndexerFunc{}}
}

// IndexField registers fn as the index named field for obj's kind, as the cache's
// IndexField does; List computes overlay objects' values with it.
func (r *Reader) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return fmt.Errorf("index %s: %w", field, err)
	}
	if r.indexes[gvk] == nil {
		r.indexes[gvk] = map[string]client.IndexerFunc{}
	}
	r.indexes[gvk][field] = fn
	return nil
}

// Add lays copies of objs over the base: each replaces the base object of the same kind,
// namespace and name, and a later one replaces an earlier one. Unstructured objects are
// converted to their typed form, so their kind must be registered in the scheme.
func (r *Reader) Add(objs ...client.Object) error {
	for _, obj := range objs {
		gvk, typed, err := r.typed(obj)
		if err != nil {
			return fmt.Errorf("%s %s: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		if r.objects[gvk] == nil {
			r.objects[gvk] = map[types.NamespacedName]client.Object{}
		}
		r.objects[gvk][client.ObjectKeyFromObject(typed)] = typed
	}
	return nil
}

// typed returns the kind of obj and a typed deep copy of it.
func (r *Reader) typed(obj client.Object) (schema.GroupVersionKind, client.Object, error) {
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return gvk, nil, err
	}
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return gvk, obj.DeepCopyObject().(client.Object), nil
	}
	out, err := r.scheme.New(gvk)
	if err != nil {
		return gvk, nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return gvk, nil, fmt.Errorf("converting to %s: %w", gvk.Kind, err)
	}
	typed, ok := out.(client.Object)
	if !ok {
		return gvk, nil, fmt.Errorf("%s is not an object with metadata", gvk.Kind)
	}
	return gvk, typed, nil
}

// Get returns the overlay object of that kind and key, else the base's, else NotFound.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, r.scheme)
	if err != nil {
		return err
	}
	if src, ok := r.objects[gvk][key]; ok {
		return copyInto(gvk, src, obj)
	}
	if r.base == nil {
		return apierrors.NewNotFound(resource(gvk), key.Name)
	}
	return r.base.Get(ctx, key, obj, opts...)
}

// List returns the base's objects that match opts, those of the overlay replaced by the
// overlay's, plus the overlay objects that match opts, sorted by namespace and name.
func (r *Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, r.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	items, err := r.baseItems(ctx, gvk, list, opts)
	if err != nil {
		return err
	}
	_, unstructuredList := list.(runtime.Unstructured)
	for _, obj := range r.objects[gvk] {
		ok, err := r.matches(gvk, obj, lo)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		item, err := outputItem(gvk, obj, unstructuredList)
		if err != nil {
			return err
		}
		items = append(items, item)
	}
	slices.SortFunc(items, compareKeys)
	return meta.SetList(list, items)
}

// baseItems lists from the base, leaving out the objects the overlay replaces.
func (r *Reader) baseItems(ctx context.Context, gvk schema.GroupVersionKind, list client.ObjectList, opts []client.ListOption) ([]runtime.Object, error) {
	if r.base == nil {
		return nil, nil
	}
	if err := r.base.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	all, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	items := make([]runtime.Object, 0, len(all))
	for _, it := range all {
		acc, err := meta.Accessor(it)
		if err != nil {
			return nil, err
		}
		if _, replaced := r.objects[gvk][types.NamespacedName{Namespace: acc.GetNamespace(), Name: acc.GetName()}]; !replaced {
			items = append(items, it)
		}
	}
	return items, nil
}

// matches applies the namespace, label selector and field selector of lo to obj. Field
// selectors must be exact matches on a registered index (or metadata.name and
// metadata.namespace), as for the cache.
func (r *Reader) matches(gvk schema.GroupVersionKind, obj client.Object, lo *client.ListOptions) (bool, error) {
	if lo.Namespace != "" && obj.GetNamespace() != lo.Namespace {
		return false, nil
	}
	if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
		return false, nil
	}
	if lo.FieldSelector == nil {
		return true, nil
	}
	for _, req := range lo.FieldSelector.Requirements() {
		if req.Operator != "=" && req.Operator != "==" {
			return false, fmt.Errorf("field selector %s: only exact matches (=, ==) are supported", lo.FieldSelector)
		}
		values, err := r.fieldValues(gvk, obj, req.Field)
		if err != nil {
			return false, err
		}
		if !slices.Contains(values, req.Value) {
			return false, nil
		}
	}
	return true, nil
}

func (r *Reader) fieldValues(gvk schema.GroupVersionKind, obj client.Object, field string) ([]string, error) {
	if fn, ok := r.indexes[gvk][field]; ok {
		return fn(obj), nil
	}
	switch field {
	case "metadata.name":
		return []string{obj.GetName()}, nil
	case "metadata.namespace":
		return []string{obj.GetNamespace()}, nil
	}
	return nil, fmt.Errorf("field selector %q: no index of that name for %s", field, gvk.Kind)
}

// copyInto copies src (typed, of kind gvk) into dst, a pointer to the same Go type or an
// unstructured object.
func copyInto(gvk schema.GroupVersionKind, src, dst client.Object) error {
	if u, ok := dst.(*unstructured.Unstructured); ok {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(src)
		if err != nil {
			return err
		}
		u.SetUnstructuredContent(content)
		u.SetGroupVersionKind(gvk)
		return nil
	}
	sv, dv := reflect.ValueOf(src.DeepCopyObject()), reflect.ValueOf(dst)
	if sv.Type() != dv.Type() {
		return fmt.Errorf("overlay holds %s as %T, cannot read it into %T", gvk.Kind, src, dst)
	}
	dv.Elem().Set(sv.Elem())
	return nil
}

// outputItem is a copy of obj fit for a typed list, or an unstructured copy for an
// unstructured list.
func outputItem(gvk schema.GroupVersionKind, obj client.Object, unstructuredList bool) (runtime.Object, error) {
	if !unstructuredList {
		return obj.DeepCopyObject(), nil
	}
	u := &unstructured.Unstructured{}
	if err := copyInto(gvk, obj, u); err != nil {
		return nil, err
	}
	return u, nil
}

func compareKeys(a, b runtime.Object) int {
	am, aerr := meta.Accessor(a)
	bm, berr := meta.Accessor(b)
	if aerr != nil || berr != nil {
		return 0
	}
	return cmp.Or(cmp.Compare(am.GetNamespace(), bm.GetNamespace()), cmp.Compare(am.GetName(), bm.GetName()))
}

// resource guesses the resource of gvk for a NotFound error (only its message uses it).
func resource(gvk schema.GroupVersionKind) schema.GroupResource {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.GroupResource()
}
