package crds_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/internal/manifest"
	"github.com/vmipam/vmipam/test/env"
)

// TestTrimmedSDNCRDs holds the trimmed SDN CRDs to what SDN documents, on a real API server:
// manifests written for a real cluster apply unchanged and keep every field, SDN's documented
// status fields can be written, and a network's spec.ipam cannot change.
func TestTrimmedSDNCRDs(t *testing.T) {
	e := env.StartThirdParty(t)
	c, err := client.New(e.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("the e2e-style manifests apply unchanged and keep every field", func(t *testing.T) { manifestsApplyUnchanged(t, c) })
	t.Run("the documented status fields are accepted", func(t *testing.T) { statusFieldsAccepted(t, c) })
	t.Run("spec.ipam is immutable", func(t *testing.T) { ipamImmutable(t, c) })
}

// strict is the field validation kubectl asks for by default: an unknown or duplicate field is
// an error, not a field the server drops.
var strict = client.FieldValidation(metav1.FieldValidationStrict)

func manifestsApplyUnchanged(t *testing.T, c client.Client) {
	ctx := context.Background()
	data, err := os.ReadFile("testdata/sdn-e2e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := manifest.Split(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e"}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		want := &unstructured.Unstructured{}
		if err := want.UnmarshalJSON(d.JSON); err != nil {
			t.Fatal(err)
		}
		obj := want.DeepCopy()
		if err := c.Create(ctx, obj, strict); err != nil {
			t.Errorf("%s %s does not apply: %v", want.GetKind(), want.GetName(), err)
			continue
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(want.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("%s %s: the server kept spec\n%v\nof\n%v", want.GetKind(), want.GetName(), got.Object["spec"], want.Object["spec"])
		}
	}
}

// statusPatches are status documents of the shapes SDN documents (sdn.md), by kind and name of
// an object the e2e-style manifests created.
var statusPatches = []struct {
	kind, namespace, name, status string
}{
	{"IPAddress", "e2e", "vm-static-ip", `{"address": "192.168.200.50", "network": "192.168.200.0/24",
		"routes": [{"destination": "203.0.113.0/24", "via": "192.168.200.1"}], "phase": "Allocated",
		"conditions": [
			{"type": "Allocated", "status": "True", "reason": "IPAddressAllocated", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			{"type": "Attached", "status": "True", "reason": "Attached", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
		"usedByPods": [{"name": "virt-launcher-vm-abcde", "namespace": "e2e"}]}`},
	{"ClusterNetwork", "", "cn-4006-for-e2e-test", `{"bridgeName": "d8-br-4006", "nodeAttachementsCount": 3,
		"readyNodeAttachementsCount": 3, "observedGeneration": 1, "conditions": [
			{"type": "Ready", "status": "True", "reason": "NetworkReady", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			{"type": "AllNodeAttachementsAreReady", "status": "True", "reason": "AllNodeAttachementsAreReady", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}`},
	{"Network", "e2e", "project-net", `{"bridgeName": "d8-br-700", "vlanID": 700, "observedGeneration": 1}`},
}

func statusFieldsAccepted(t *testing.T, c client.Client) {
	ctx := context.Background()
	for _, p := range statusPatches {
		obj := &unstructured.Unstructured{}
		obj.SetAPIVersion("network.deckhouse.io/v1alpha1")
		obj.SetKind(p.kind)
		obj.SetNamespace(p.namespace)
		obj.SetName(p.name)
		patch := []byte(`{"status": ` + p.status + `}`)
		if err := c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
			t.Errorf("status of %s %s: %v", p.kind, p.name, err)
		}
	}
	lease := &unstructured.Unstructured{}
	if err := lease.UnmarshalJSON([]byte(`{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "IPAddressLease",
		"metadata": {"name": "ip-192-168-200-50"}, "spec": {"ip": "192.168.200.50", "ttl": "1h0m0s"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, lease, strict); err != nil {
		t.Fatalf("IPAddressLease: %v", err)
	}
	patch := []byte(`{"status": {"orphaningTimestamp": "` + time.Now().UTC().Format(time.RFC3339) + `"}}`)
	if err := c.Status().Patch(ctx, lease, client.RawPatch(types.MergePatchType, patch), strict); err != nil {
		t.Errorf("IPAddressLease status: %v", err)
	}
}

func ipamImmutable(t *testing.T, c client.Client) {
	ctx := context.Background()
	create := func(kind, namespace, name, spec string) *unstructured.Unstructured {
		t.Helper()
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(`{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "` + kind + `",
			"metadata": {"namespace": "` + namespace + `", "name": "` + name + `"}, "spec": ` + spec + `}`)); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, obj, strict); err != nil {
			t.Fatalf("creating %s %s: %v", kind, name, err)
		}
		return obj
	}
	// patch applies a merge patch to obj and returns the API server's error.
	patch := func(obj *unstructured.Unstructured, p string) error {
		return c.Patch(ctx, obj.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)))
	}
	const poolA = `{"ipam": {"ipAddressPoolRef": {"kind": "ClusterIPAddressPool", "name": "a"}}}`
	refused := []struct{ name, patch string }{
		{"a pool added", `{"spec": ` + poolA + `}`},
		{"the pool renamed", `{"spec": {"ipam": {"ipAddressPoolRef": {"name": "b"}}}}`},
		{"the pool removed", `{"spec": {"ipam": null}}`},
	}
	for _, kind := range []struct{ kind, namespace, pool string }{
		{"ClusterNetwork", "", "ClusterIPAddressPool"}, {"Network", "e2e", "IPAddressPool"},
	} {
		withPool := strings.ReplaceAll(poolA, "ClusterIPAddressPool", kind.pool)
		l2 := create(kind.kind, kind.namespace, "l2-"+strings.ToLower(kind.kind), `{}`)
		pooled := create(kind.kind, kind.namespace, "pooled-"+strings.ToLower(kind.kind), withPool)
		bare := &unstructured.Unstructured{}
		if err := bare.UnmarshalJSON([]byte(`{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "` + kind.kind + `",
			"metadata": {"namespace": "` + kind.namespace + `", "name": "bare-` + strings.ToLower(kind.kind) + `"}}`)); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, bare, strict); err != nil {
			t.Fatalf("creating a %s without spec: %v", kind.kind, err)
		}
		for _, r := range refused {
			target := pooled
			if r.name == "a pool added" {
				target = l2
			}
			p := strings.ReplaceAll(r.patch, "ClusterIPAddressPool", kind.pool)
			for _, obj := range []*unstructured.Unstructured{target, bare} {
				if obj == bare && r.name != "a pool added" {
					continue
				}
				err := patch(obj, p)
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ipam is immutable") {
					t.Errorf("%s %s, %s: error %v, want Invalid: spec.ipam is immutable", kind.kind, obj.GetName(), r.name, err)
				}
			}
		}
		if err := patch(pooled, `{"spec": {"vlan": {"id": 901}}, "metadata": {"labels": {"team": "net"}}}`); err != nil {
			t.Errorf("%s: an edit beside spec.ipam was refused: %v", kind.kind, err)
		}
		if err := c.Delete(ctx, l2); err != nil {
			t.Fatal(err)
		}
		recreated := create(kind.kind, kind.namespace, l2.GetName(), withPool)
		if recreated.GetUID() == l2.GetUID() {
			t.Errorf("%s: recreated with the same UID", kind.kind)
		}
	}
}
