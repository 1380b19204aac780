package index

import (
	"context"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// Buckets is how many values a bucketed index (IPAddressOwnerBucket, PodVMBucket) spreads its
// objects over.
//
// Why buckets: these two indexes look up one VM's objects, so keyed by the VM they hold a
// set per VM — client-go's index keeps a Go map per value, ~270 bytes for a set of one or
// two entries, ~5 MB of the controller's live heap at 10,000 VMs (docs/BENCHMARKS.md).
// 1,024 buckets hold ~10 VMs' objects each at 10,000 VMs and ~100 at 100,000 (the values
// hashed are unique per VM: a UID, a namespace and name), which a lookup
// filters by namespace and owner or label. The buckets span namespaces (ClusterWide), so the
// saving holds however the VMs are spread over namespaces; a sharded controller's cache
// (one informer per namespace) answers a lookup by asking each of its namespaces.
const Buckets = 1024

// bucketNames are the index values of the buckets, made once so indexing allocates no name.
var bucketNames = func() (out [Buckets]string) {
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// Bucket is the index value of s in a bucketed index: the decimal number of its bucket, FNV-1a
// of s modulo Buckets.
func Bucket(s string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s)) // a hash.Hash's Write never fails
	return bucketNames[h.Sum32()%Buckets]
}

// PodBucket is the PodVMBucket value of the launcher pods of VM vm in namespace: the Bucket
// of "<namespace>/<vm>". The namespace is part of it because VM names repeat across
// namespaces (every team's "web"): keyed by the name alone, one bucket would hold all of
// them, and every lookup of one would read them all.
func PodBucket(namespace, vm string) string { return Bucket(namespace + "/" + vm) }

// EachOwnedIPAddress calls fn with every IPAddress in namespace whose controlling owner is the
// VirtualMachine with uid, as r holds it: fn must not modify or keep it (it may be the cache's
// own object). Errors are r's.
func EachOwnedIPAddress(ctx context.Context, r client.Reader, namespace string, uid types.UID, fn func(*sdnv1.IPAddress)) error {
	var list sdnv1.IPAddressList
	if err := r.List(ctx, &list, client.MatchingFields{IPAddressOwnerBucket: Bucket(string(uid))},
		client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range list.Items {
		ip := &list.Items[i]
		if ref := ControllerVM(ip); ip.Namespace == namespace && ref != nil && ref.UID == uid {
			fn(ip)
		}
	}
	return nil
}

// OwnedIPAddresses returns copies of the IPAddresses in namespace whose controlling owner is
// the VirtualMachine with uid, in r's order. Errors are r's.
func OwnedIPAddresses(ctx context.Context, r client.Reader, namespace string, uid types.UID) ([]sdnv1.IPAddress, error) {
	var out []sdnv1.IPAddress
	err := EachOwnedIPAddress(ctx, r, namespace, uid, func(ip *sdnv1.IPAddress) {
		out = append(out, *ip.DeepCopy())
	})
	return out, err
}

// LauncherPods returns copies of the pods in namespace labelled as VM vm's launcher pods
// (vm.kubevirt.io/name, set by the virtualization controller), in r's order. Errors are r's.
func LauncherPods(ctx context.Context, r client.Reader, namespace, vm string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.MatchingFields{PodVMBucket: PodBucket(namespace, vm)}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Namespace == namespace && p.Labels[vmv1.LabelLauncherVMName] == vm {
			out = append(out, *p.DeepCopy())
		}
	}
	return out, nil
}

// ClusterWideLookup reports whether lo looks up a value keyed across namespaces only
// (ClusterWide): a lookup that cannot name a namespace, such as a bucket's.
func ClusterWideLookup(lo *client.ListOptions) bool {
	if lo.FieldSelector == nil {
		return false
	}
	for _, req := range lo.FieldSelector.Requirements() {
		if ClusterWide(req.Field, req.Value) {
			return true
		}
	}
	return false
}

// KeepNamespace drops from list every item outside namespace: how a reader confined to one
// namespace answers a ClusterWideLookup, keeping what a lookup of one VM's objects by bucket
// (OwnedIPAddresses, LauncherPods) keeps anyway. Errors are meta's, for a list it cannot
// read or set.
func KeepNamespace(list client.ObjectList, namespace string) error {
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, it := range items {
		if acc, err := meta.Accessor(it); err == nil && acc.GetNamespace() == namespace {
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}
