package vm

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

type staticSet struct{ set *evaluator.Set }

func (s staticSet) Set() *evaluator.Set { return s.set }

func builtinSet(t *testing.T) PolicySource {
	return staticSet{compiledSet(t)}
}

// TestTransientAPIErrorKeepsThePreviousCondition: when a read fails, Reconcile returns the
// error and writes no status, so NetworkReady stays what it was.
func TestTransientAPIErrorKeepsThePreviousCondition(t *testing.T) {
	scheme := runtimeScheme(t)
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "ClusterNetwork", Name: "corp", IPAddressName: "s"}}
	previous := metav1.Condition{Type: ConditionNetworkReady, Status: metav1.ConditionTrue, Reason: ReasonNetworkReady, Message: "before"}
	vm.Status.Conditions = []metav1.Condition{previous}
	statusWrites := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(vm).WithStatusSubresource(vm).
		WithIndex(&sdnv1.IPAddress{}, index.IPAddressOwnerUID, func(client.Object) []string { return nil }).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*sdnv1.IPAddress); ok {
					return errors.New("etcd leader changed")
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				statusWrites++
				return nil
			},
		}).Build()
	r := &Reconciler{Client: c, APIReader: c, Policies: builtinSet(t)}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "v"}})
	if err == nil {
		t.Fatal("Reconcile swallowed the API error")
	}
	if statusWrites != 0 {
		t.Errorf("status written %d times on a failed read", statusWrites)
	}
	got := &vmv1.VirtualMachine{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), got); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, ConditionNetworkReady); cond == nil || cond.Message != "before" {
		t.Errorf("NetworkReady changed: %+v", cond)
	}
}
