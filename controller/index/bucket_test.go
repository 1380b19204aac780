package index_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/overlay"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// sameBucket returns a string other than s, made from prefix, in s's bucket.
func sameBucket(t *testing.T, s, prefix string) string {
	t.Helper()
	for i := range 100 * index.Buckets {
		if c := fmt.Sprintf("%s%d", prefix, i); c != s && index.Bucket(c) == index.Bucket(s) {
			return c
		}
	}
	t.Fatalf("no string in the bucket of %q", s)
	return ""
}

// sortedNames are the names of items, sorted.
func sortedNames[T any, P interface {
	*T
	GetName() string
}](items []T) []string {
	out := make([]string, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	slices.Sort(out)
	return out
}

func reader(t *testing.T, objs ...client.Object) *overlay.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, sdnv1.AddToScheme, vmv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	r := overlay.New(nil, scheme)
	if err := index.Setup(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(objs...); err != nil {
		t.Fatal(err)
	}
	return r
}

func ipAddress(namespace, name string, owner types.UID, controller bool) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
			Name: "vm", UID: owner, Controller: ptr.To(controller)}}}}
}

func TestOwnedIPAddressesAreTheVMsOwnOnlyNotItsBucketsOrNamespacesOthers(t *testing.T) {
	uid := types.UID("6f1c2a50-0000-4000-8000-000000000001")
	neighbour := types.UID(sameBucket(t, string(uid), "6f1c2a50-0000-4000-8000-"))
	r := reader(t,
		ipAddress("a", "mine-1", uid, true),
		ipAddress("a", "mine-2", uid, true),
		ipAddress("a", "neighbours", neighbour, true),
		ipAddress("b", "same-uid-other-namespace", uid, true),
		ipAddress("a", "owned-not-controlled", uid, false),
	)
	got, err := index.OwnedIPAddresses(context.Background(), r, "a", uid)
	if err != nil {
		t.Fatal(err)
	}
	if names := sortedNames(got); !slices.Equal(names, []string{"mine-1", "mine-2"}) {
		t.Errorf("owned IPAddresses = %v, want [mine-1 mine-2]", names)
	}

	got[0].Labels = map[string]string{"changed": "yes"}
	again, _ := index.OwnedIPAddresses(context.Background(), r, "a", uid)
	for _, ip := range again {
		if ip.Labels != nil {
			t.Errorf("%s: a change to a returned IPAddress reached the reader: %v", ip.Name, ip.Labels)
		}
	}
}

func TestLauncherPodsAreTheVMsOnlyNotItsBucketsOrNamespacesOthers(t *testing.T) {
	pod := func(namespace, name, vm string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{vmv1.LabelLauncherVMName: vm}}}
	}
	neighbour := sameBucket(t, "a/web", "a/vm-")[len("a/"):]
	stranger := sameBucket(t, "a/web", "b/vm-")[len("b/"):] // a VM of namespace b whose pods share a/web's bucket
	r := reader(t,
		pod("a", "virt-launcher-web-1", "web"),
		pod("a", "virt-launcher-web-2", "web"),
		pod("a", "virt-launcher-"+neighbour, neighbour),
		pod("b", "virt-launcher-web-3", "web"),
		pod("b", "virt-launcher-"+stranger, stranger),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "unlabelled"}},
	)
	got, err := index.LauncherPods(context.Background(), r, "a", "web")
	if err != nil {
		t.Fatal(err)
	}
	if names := sortedNames(got); !slices.Equal(names, []string{"virt-launcher-web-1", "virt-launcher-web-2"}) {
		t.Errorf("launcher pods = %v, want web's two in namespace a", names)
	}
}

func TestBucketIsStableAndSpreads(t *testing.T) {
	seen := map[string]int{}
	for i := range 10 * index.Buckets {
		b := index.Bucket(fmt.Sprintf("vm-%d", i))
		if b != index.Bucket(fmt.Sprintf("vm-%d", i)) {
			t.Fatalf("bucket of vm-%d changed between calls", i)
		}
		seen[b]++
	}
	if len(seen) < index.Buckets*9/10 {
		t.Errorf("%d names fell in %d of %d buckets, want nearly all used", 10*index.Buckets, len(seen), index.Buckets)
	}
	for b, n := range seen {
		if n > 40 {
			t.Errorf("bucket %s holds %d of %d names (10 expected)", b, n, 10*index.Buckets)
		}
	}
}

// Every team names a VM "web": the namespace is part of the pods' bucket, so the "web"s of
// many namespaces spread over the buckets instead of all sharing one.
func TestTheSameVMNameInManyNamespacesSpreadsOverTheBuckets(t *testing.T) {
	seen := map[string]bool{}
	for i := range 1000 {
		seen[index.PodBucket(fmt.Sprintf("team-%d", i), "web")] = true
	}
	if len(seen) < 500 { // 1,000 values in 1,024 buckets fill ~640
		t.Errorf("1,000 namespaces' VM web fell in %d buckets, want them spread", len(seen))
	}
}
