package dryrun

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

func TestScopedReadsOnlyTheVMNamespaceAndClusterNetworks(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sdnv1.AddToScheme, vmv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	r := scoped{base: fake.NewClientBuilder().WithScheme(s).Build(), scheme: s, namespace: "demo"}
	ctx := context.Background()
	allowed := []error{
		r.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "x"}, &sdnv1.IPAddress{}),
		r.Get(ctx, client.ObjectKey{Name: "corp"}, &sdnv1.ClusterNetwork{}),
		r.Get(ctx, client.ObjectKey{Name: "demo"}, &corev1.Namespace{}),
		r.List(ctx, &vmv1.VirtualMachineList{}, client.InNamespace("demo")),
		r.List(ctx, &sdnv1.ClusterIPAddressPoolList{}),
	}
	for i, err := range allowed {
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("allowed read %d: %v", i, err)
		}
	}
	forbidden := []error{
		r.Get(ctx, client.ObjectKey{Namespace: "other", Name: "x"}, &sdnv1.IPAddress{}),
		r.Get(ctx, client.ObjectKey{Namespace: "demo", Name: "s"}, &corev1.Secret{}),
		r.Get(ctx, client.ObjectKey{Name: "kube-system"}, &corev1.Namespace{}),
		r.List(ctx, &vmv1.VirtualMachineList{}),
		r.List(ctx, &corev1.PodList{}, client.InNamespace("other")),
		r.List(ctx, &corev1.NamespaceList{}),
	}
	for i, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("read %d outside the scope: %v, want Forbidden", i, err)
		}
	}
}

func TestScopedBucketLookupKeepsOnlyTheVMNamespace(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, sdnv1.AddToScheme, vmv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(namespace string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "virt-launcher-web",
			Labels: map[string]string{vmv1.LabelLauncherVMName: "web"}}}
	}
	base := fake.NewClientBuilder().WithScheme(s).WithObjects(pod("demo"), pod("other")).
		WithIndex(&corev1.Pod{}, index.PodVMBucket, func(o client.Object) []string {
			return []string{index.Bucket(o.GetLabels()[vmv1.LabelLauncherVMName])}
		}).Build()
	r := scoped{base: base, scheme: s, namespace: "demo"}
	var pods corev1.PodList
	if err := r.List(context.Background(), &pods, client.MatchingFields{index.PodVMBucket: index.Bucket("web")}); err != nil {
		t.Fatalf("a bucket lookup: %v, want it allowed", err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Namespace != "demo" {
		t.Errorf("a bucket lookup returned %d pods (%v), want demo's one only", len(pods.Items), pods.Items)
	}
	if err := r.List(context.Background(), &pods, client.MatchingFields{index.CarriedIPAddress: "x"}); !apierrors.IsForbidden(err) {
		t.Errorf("a lookup of another index across namespaces: %v, want Forbidden", err)
	}
}
