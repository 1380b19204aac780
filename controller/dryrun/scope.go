package dryrun

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vmipam/vmipam/controller/index"
)

// scoped restricts the base reader (the cache) to what a request may draw on: objects of the
// VM's namespace, that Namespace itself, and cluster-scoped networks and pools — the kinds of
// allowedKinds. The controller's observation reads nothing else; the restriction makes sure
// that no future read widens what a caller, authorized for one namespace, gets to see.
type scoped struct {
	base      client.Reader
	scheme    *runtime.Scheme
	namespace string
}

var _ client.Reader = scoped{}

// Get reads from the base when key is within the scope.
func (s scoped) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, s.scheme)
	if err != nil {
		return err
	}
	if err := s.check(gvk, key.Namespace, key.Name); err != nil {
		return err
	}
	return s.base.Get(ctx, key, obj, opts...)
}

// List lists from the base when the list is within the scope: namespaced kinds only in the
// VM's namespace (a lookup keyed across namespaces narrowed to it), cluster-scoped networks
// and pools in full.
func (s scoped) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, s.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.Namespace == "" && allowedKinds[gvk].namespaced && index.ClusterWideLookup(lo) {
		return s.listNarrowed(ctx, list, opts)
	}
	name := ""
	if allowedKinds[gvk].onlyVMNamespace {
		name = "*" // never a whole list of Namespaces
	}
	if err := s.check(gvk, lo.Namespace, name); err != nil {
		return err
	}
	return s.base.List(ctx, list, opts...)
}

// listNarrowed lists a lookup keyed across namespaces (index.ClusterWideLookup) from the
// base and keeps the objects of the VM's namespace only (index.KeepNamespace).
func (s scoped) listNarrowed(ctx context.Context, list client.ObjectList, opts []client.ListOption) error {
	if err := s.base.List(ctx, list, opts...); err != nil {
		return err
	}
	return index.KeepNamespace(list, s.namespace)
}

func (s scoped) check(gvk schema.GroupVersionKind, namespace, name string) error {
	rule, ok := allowedKinds[gvk]
	switch {
	case !ok:
	case rule.namespaced && namespace != s.namespace:
	case rule.onlyVMNamespace && name != s.namespace:
	default:
		return nil
	}
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return apierrors.NewForbidden(plural.GroupResource(), name,
		fmt.Errorf("a dry run of a VM in namespace %q draws only on that namespace and on cluster-scoped networks and pools", s.namespace))
}
