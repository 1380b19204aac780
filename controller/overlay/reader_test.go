package overlay_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/overlay"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sdnv1.AddToScheme, vmv1.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// builderIndexer registers indexes with a fake client builder, so the base answers the same
// MatchingFields as the overlay.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// newReader returns an overlay over a fake base holding base, with vmipam's indexes on both.
func newReader(t *testing.T, base ...client.Object) *overlay.Reader {
	t.Helper()
	s := newScheme(t)
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(base...)
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	r := overlay.New(b.Build(), s)
	if err := index.Setup(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func vm(name string, ipAddressNames ...string) *vmv1.VirtualMachine {
	v := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}}
	for _, ip := range ipAddressNames {
		v.Spec.Networks = append(v.Spec.Networks, vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: "corp", IPAddressName: ip})
	}
	return v
}

func listNames(t *testing.T, r client.Reader, opts ...client.ListOption) []string {
	t.Helper()
	var list vmv1.VirtualMachineList
	if err := r.List(context.Background(), &list, opts...); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range list.Items {
		out = append(out, v.Name)
	}
	return out
}

func TestGetPrefersTheOverlayAndFallsBackToTheBase(t *testing.T) {
	r := newReader(t, vm("a", "old"), vm("b"))
	if err := r.Add(vm("a", "new")); err != nil {
		t.Fatal(err)
	}
	got := &vmv1.VirtualMachine{}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "a"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Networks[0].IPAddressName != "new" {
		t.Errorf("Get a = %+v, want the overlay's version", got.Spec)
	}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "b"}, got); err != nil || got.Name != "b" {
		t.Errorf("Get b = %v, %v; want the base's", got.Name, err)
	}
	err := r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "c"}, got)
	if !apierrors.IsNotFound(err) {
		t.Errorf("Get c: %v, want NotFound", err)
	}
}

func TestListByIndexSeesOverlayValuesNotTheReplacedBaseOnes(t *testing.T) {
	r := newReader(t, vm("a", "shared"), vm("b", "shared"), vm("c", "other"))
	// a no longer names "shared"; c now does; d is new and does too.
	if err := r.Add(vm("a", "mine"), vm("c", "shared"), vm("d", "shared")); err != nil {
		t.Fatal(err)
	}
	got := listNames(t, r, client.InNamespace("demo"), client.MatchingFields{index.VMIPAddressName: "shared"})
	if want := []string{"b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("VMs naming shared = %v, want %v (sorted, a's base version replaced)", got, want)
	}
	if got := listNames(t, r, client.InNamespace("other")); len(got) != 0 {
		t.Errorf("VMs in namespace other = %v, want none", got)
	}
}

func TestWithoutBaseOnlyTheObjectsExist(t *testing.T) {
	r := overlay.New(nil, newScheme(t))
	if err := index.Setup(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "virt-launcher-a",
		Labels: map[string]string{vmv1.LabelLauncherVMName: "a", "tier": "x"}}}
	if err := r.Add(pod, vm("a")); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := r.List(context.Background(), &pods, client.MatchingFields{index.PodVMBucket: index.PodBucket("demo", "a")},
		client.MatchingLabels{"tier": "x"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of a = %d, %v; want the one pod", len(pods.Items), err)
	}
	if got, err := index.LauncherPods(context.Background(), r, "demo", "a"); err != nil || len(got) != 1 {
		t.Fatalf("launcher pods of a = %d, %v; want the one pod", len(got), err)
	}
	if err := r.List(context.Background(), &pods, client.MatchingFields{"spec.nodeName": "n"}); err == nil {
		t.Error("a field selector without an index: want an error, as from the cache")
	}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "b"}, &vmv1.VirtualMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get b: %v, want NotFound", err)
	}
}

func TestUnstructuredObjectsAreStoredTyped(t *testing.T) {
	r := overlay.New(nil, newScheme(t))
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": sdnv1.GroupVersion.String(), "kind": "IPAddress",
		"metadata": map[string]any{"name": "ip", "namespace": "demo"},
		"spec":     map[string]any{"type": "Static", "networkRef": map[string]any{"kind": "ClusterNetwork", "name": "corp"}},
	}}
	if err := r.Add(u); err != nil {
		t.Fatal(err)
	}
	ip := &sdnv1.IPAddress{}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "ip"}, ip); err != nil || ip.Spec.Type != sdnv1.IPAddressTypeStatic {
		t.Errorf("typed Get = %+v, %v", ip.Spec, err)
	}
	back := &unstructured.Unstructured{}
	back.SetGroupVersionKind(sdnv1.GroupVersion.WithKind("IPAddress"))
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "ip"}, back); err != nil || back.GetName() != "ip" {
		t.Errorf("unstructured Get = %v, %v", back.GetName(), err)
	}
}

func TestReadsDoNotChangeTheStoredObjects(t *testing.T) {
	r := overlay.New(nil, newScheme(t))
	if err := r.Add(vm("a", "x")); err != nil {
		t.Fatal(err)
	}
	got := &vmv1.VirtualMachine{}
	_ = r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "a"}, got)
	got.Spec.Networks[0].IPAddressName = "changed"
	_ = r.Get(context.Background(), client.ObjectKey{Namespace: "demo", Name: "a"}, got)
	if got.Spec.Networks[0].IPAddressName != "x" {
		t.Error("a caller's change to a returned object leaked into the overlay")
	}
}
