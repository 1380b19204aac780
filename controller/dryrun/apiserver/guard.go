package apiserver

import (
	"context"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/warning"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/vmipam/vmipam/controller/index"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// readGuard is the cache as an evaluation reads it: whatever of the cluster's state reaches
// the answer — the evaluated VM's live copy (its UID, annotations and status), the IPAddresses,
// networks and pools, the launcher pods, the Namespace, the other VMs that contend for an
// address (their names) — is handed out only after the caller is allowed to read it
// themselves: get on an object read by name, list on a kind listed (when the list is not
// empty). A caller never learns more from an answer than they could read. The checks are
// made at the read, so an object that appears after the request arrived is guarded too; an
// object that does not exist needs no permission. Objects the request itself carries
// (spec.objects) are the caller's own and are not read through the guard.
type readGuard struct {
	client.Reader
	scheme *runtime.Scheme
	// evaluated is the evaluated VM; evaluatedWhy, when set, says why its check was made
	// already (spec.virtualMachineName), so the denial names the spec's field.
	evaluated    client.ObjectKey
	evaluatedWhy string
	// allowed asks the API server (the caller is filled in).
	allowed func(ctx context.Context, a authorizer.AttributesRecord, why string) error
}

// Get reads from the cache and authorizes get on what it found before handing it out.
func (g *readGuard) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := g.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	why := "an answer drawing on it requires it"
	if _, isVM := obj.(*vmv1.VirtualMachine); isVM && key == g.evaluated {
		why = "spec.vm naming an existing VM requires it"
		if g.evaluatedWhy != "" {
			why = g.evaluatedWhy
		}
	}
	if err := g.check(ctx, obj, "get", key.Namespace, key.Name, why); err != nil {
		zero(obj)
		return err
	}
	return nil
}

// List lists from the cache and authorizes list on the kind in the namespace when the list
// has items. A lookup keyed across namespaces (index.ClusterWideLookup: one VM's IPAddresses
// or launcher pods, by bucket) is narrowed to the evaluated VM's namespace first and checked
// there: the evaluation draws on nothing else of it, so a caller allowed to list in the VM's
// namespace needs no more, and nothing of another namespace — not even whether the bucket
// holds something there — reaches the answer.
func (g *readGuard) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := g.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	namespace := lo.Namespace
	if namespace == "" && index.ClusterWideLookup(lo) {
		namespace = g.evaluated.Namespace
		if err := index.KeepNamespace(list, namespace); err != nil {
			return err
		}
	}
	if meta.LenList(list) == 0 {
		return nil
	}
	if err := g.check(ctx, list, "list", namespace, "", "an answer drawing on them requires it"); err != nil {
		_ = meta.SetList(list, nil)
		return err
	}
	return nil
}

// check asks whether the caller may verb the kind of obj (namespace, name).
func (g *readGuard) check(ctx context.Context, obj runtime.Object, verb, namespace, name, why string) error {
	gvk, err := apiutil.GVKForObject(obj, g.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	if plural.GroupResource() == corev1.Resource("namespaces") {
		namespace = name // a Namespace is read in itself, as the API server's request info has it
	}
	a := authorizer.AttributesRecord{Verb: verb, Namespace: namespace, Name: name, APIGroup: gvk.Group, APIVersion: gvk.Version,
		Resource: plural.Resource, ResourceRequest: true}
	return g.allowed(ctx, a, why)
}

// zero empties obj, so that nothing of a denied read leaves the guard.
func zero(obj client.Object) {
	if u, ok := obj.(runtime.Unstructured); ok {
		u.SetUnstructuredContent(map[string]any{})
		return
	}
	v := reflect.ValueOf(obj).Elem()
	v.Set(reflect.Zero(v.Type()))
}

// warn sends the warnings to the caller (the Warning headers of the response).
func warn(ctx context.Context, warnings []string) {
	for _, w := range warnings {
		warning.AddWarning(ctx, "", w)
	}
}

// notFoundNamespace is the API server's answer to a namespaced create in a namespace that
// does not exist.
func notFoundNamespace(namespace string) error {
	return apierrors.NewNotFound(corev1.Resource("namespaces"), namespace)
}
