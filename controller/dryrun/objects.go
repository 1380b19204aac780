package dryrun

import (
	"fmt"
	"slices"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

// kindRule says where objects of a kind a request may carry live.
type kindRule struct {
	namespaced bool
	// onlyVMNamespace: the object must be the VM's Namespace itself.
	onlyVMNamespace bool
}

// allowedKinds are the kinds of objects a request may overlay: what the controller reads
// about a VM. Namespaced ones must be in the VM's namespace; the cluster-scoped ones are
// networks, pools and the VM's own Namespace. Everything else is refused, so an answer
// never draws on other namespaces.
var allowedKinds = map[schema.GroupVersionKind]kindRule{
	sdnv1.GroupVersion.WithKind("IPAddress"):            {namespaced: true},
	sdnv1.GroupVersion.WithKind("Network"):              {namespaced: true},
	sdnv1.GroupVersion.WithKind("IPAddressPool"):        {namespaced: true},
	sdnv1.GroupVersion.WithKind("ClusterNetwork"):       {},
	sdnv1.GroupVersion.WithKind("ClusterIPAddressPool"): {},
	vmv1.GroupVersion.WithKind("VirtualMachine"):        {namespaced: true},
	corev1.SchemeGroupVersion.WithKind("Pod"):           {namespaced: true},
	ipamv1.GroupVersion.WithKind("VirtualMachineIPAM"):  {namespaced: true},
	corev1.SchemeGroupVersion.WithKind("Namespace"):     {onlyVMNamespace: true},
}

// OverlayKind says whether a request may carry objects of gvk in its objects. A server
// checks it before spending anything on an object (reading its kind's CRD schema, say).
func OverlayKind(gvk schema.GroupVersionKind) bool {
	_, ok := allowedKinds[gvk]
	return ok
}

func allowedKindNames() []string {
	out := make([]string, 0, len(allowedKinds))
	for gvk := range allowedKinds {
		out = append(out, gvk.Kind+" "+gvk.GroupVersion().String())
	}
	slices.Sort(out)
	return out
}

// place puts obj in the VM's namespace when it is namespaced and names none, and reports an
// object outside it.
func (k kindRule) place(path *field.Path, obj client.Object, namespace string) field.ErrorList {
	switch {
	case k.namespaced && obj.GetNamespace() == "":
		obj.SetNamespace(namespace)
	case k.namespaced && obj.GetNamespace() != namespace:
		return field.ErrorList{field.Invalid(path.Child("namespace"), obj.GetNamespace(),
			fmt.Sprintf("must be the VM's namespace %q: a request draws only on the VM's namespace and on cluster-scoped networks and pools", namespace))}
	case !k.namespaced && obj.GetNamespace() != "":
		return field.ErrorList{field.Forbidden(path.Child("namespace"), "the kind is cluster-scoped")}
	case k.onlyVMNamespace && obj.GetName() != namespace:
		return field.ErrorList{field.Invalid(path.Child("name"), obj.GetName(),
			fmt.Sprintf("only the VM's own Namespace %q may be overlaid", namespace))}
	}
	return nil
}

// uidSpace is the name space of stand-in UIDs (a UUID version 5 per kind, namespace and name).
var uidSpace = uuid.Must(uuid.Parse("6f1d1f5e-6c4b-4d59-9a38-1f0e6f3c2a10"))

// standInUID is the UID given to an object that has none: the same for the same kind,
// namespace and name, so that offline answers are reproducible and ownerReferences written
// without a UID can be resolved.
func standInUID(kind, namespace, name string) types.UID {
	return types.UID(uuid.NewSHA1(uidSpace, []byte(kind+"/"+namespace+"/"+name)).String())
}

// withUIDs gives every object without a UID its stand-in.
func withUIDs(objs []client.Object) {
	for _, o := range objs {
		if o.GetUID() == "" {
			o.SetUID(standInUID(o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName()))
		}
	}
}

// resolveOwners fills the UID of VirtualMachine ownerReferences written without one, with
// the UID of the VM of that name as uidOf resolves it. It reports whether it changed obj.
func resolveOwners(obj client.Object, uidOf func(name string) types.UID) bool {
	refs := obj.GetOwnerReferences()
	changed := false
	for i := range refs {
		if refs[i].Kind == "VirtualMachine" && refs[i].APIVersion == vmv1.GroupVersion.String() && refs[i].UID == "" {
			refs[i].UID = uidOf(refs[i].Name)
			changed = true
		}
	}
	if changed {
		obj.SetOwnerReferences(refs)
	}
	return changed
}
