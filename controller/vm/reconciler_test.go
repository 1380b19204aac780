package vm

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// TestTransientAPIErrorWritesNothing: when a read fails, Reconcile returns the error and
// writes no record, so what the VM shows stays what it was.
func TestTransientAPIErrorWritesNothing(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "ClusterNetwork", Name: "corp", IPAddressName: "s"}}
	writes := 0
	b := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*sdnv1.IPAddress); ok {
					return errors.New("etcd leader changed")
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				writes++
				return nil
			},
			Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				writes++
				return nil
			},
		})
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	r := &Reconciler{Client: c, APIReader: c, Policies: builtinSet(t)}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "v"}})
	if err == nil {
		t.Fatal("Reconcile swallowed the API error")
	}
	if writes != 0 {
		t.Errorf("%d writes on a failed read", writes)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), &v1alpha1.VirtualMachineIPAM{}); err == nil {
		t.Error("a record was written on a failed read")
	}
}

// builderIndexer registers indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// TestRetryBackoffGrowsOnlyWhenTheRetryIsDue: a VM waiting for a pool is retried at 2 s, 4 s,
// 8 s, …; reconciles that events bring in between keep the schedule instead of growing it.
func TestRetryBackoffGrowsOnlyWhenTheRetryIsDue(t *testing.T) {
	r := &Reconciler{} // without SetupWithManager: must not panic
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "v"}}
	b, now := r.retries(), time.Unix(0, 0)
	if d := b.next(req, now); d != exhaustionBaseDelay {
		t.Fatalf("first retry after %v, want %v", d, exhaustionBaseDelay)
	}
	for range 5 { // events before the retry is due
		now = now.Add(100 * time.Millisecond)
		if d := b.next(req, now); d > exhaustionBaseDelay {
			t.Fatalf("an event-driven reconcile grew the backoff to %v", d)
		}
	}
	now = now.Add(exhaustionBaseDelay)
	if d := b.next(req, now); d != 2*exhaustionBaseDelay {
		t.Errorf("second retry after %v, want %v", d, 2*exhaustionBaseDelay)
	}
	b.forget(req)
	if d := b.next(req, now); d != exhaustionBaseDelay {
		t.Errorf("after forget: %v, want %v", d, exhaustionBaseDelay)
	}
}
