package vm

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// TestAnAutoIPAddressMadeUnderAClockRunningAheadWaitsItsGraceFromItsCreate: the API server,
// an hour ahead, dates the Auto IPAddress vmipam creates an hour after the controller's now.
// SDN never answers it; the reconcile that comes when its grace ends (UnansweredGrace after
// the create, on the controller's clock) reports it pending — it does not start the grace
// over from that look, as it did when nothing remembered the create. The same holds when the
// create's answer was lost (a timeout after the API server stored it) and the retry's create
// meets AlreadyExists while the cache does not show the address yet.
func TestAnAutoIPAddressMadeUnderAClockRunningAheadWaitsItsGraceFromItsCreate(t *testing.T) {
	for _, lost := range []bool{false, true} {
		name := map[bool]string{false: "answered create", true: "create whose answer was lost"}[lost]
		t.Run(name, func(t *testing.T) { ownCreateUnderSkew(t, lost) })
	}
}

// ownCreateUnderSkew is TestAnAutoIPAddressMadeUnderAClockRunningAheadWaitsItsGraceFromItsCreate
// for one way the create goes.
func ownCreateUnderSkew(t *testing.T, lost bool) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u", Generation: 1}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "corp"}}
	corp := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "corp"},
		Spec:   sdnv1.ClusterNetworkSpec{IPAM: &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindClusterIPAddressPool, Name: "p"}}},
		Status: sdnv1.NetworkStatus{Conditions: []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "NetworkReady"}}}}
	b := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm, corp)
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	api := b.Build()
	creates, hidden := 0, false // hidden: the cache does not show IPAddresses yet
	cache := interceptor.NewClient(api, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*sdnv1.IPAddress); !ok {
				return c.Create(ctx, obj, opts...)
			}
			obj.SetCreationTimestamp(metav1.NewTime(t0.Add(time.Hour))) // the API server's clock: an hour ahead
			obj.SetUID("ip-uid")
			creates++
			err := c.Create(ctx, obj, opts...)
			if lost && creates == 1 && err == nil {
				return apierrors.NewTimeoutError("the answer was lost", 1)
			}
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*sdnv1.IPAddressList); ok && hidden {
				return nil
			}
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*sdnv1.IPAddress); ok && hidden {
				return apierrors.NewNotFound(sdnv1.GroupVersion.WithResource("ipaddresses").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	clk := clocktesting.NewFakePassiveClock(t0)
	r := &Reconciler{Client: cache, APIReader: api, Policies: builtinSet(t), Clock: clk}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "v"}}
	record := func() *v1alpha1.VirtualMachineIPAM {
		rec := &v1alpha1.VirtualMachineIPAM{}
		if err := api.Get(context.Background(), req.NamespacedName, rec); err != nil {
			return nil
		}
		return rec
	}

	created := t0
	if lost {
		if _, err := r.Reconcile(context.Background(), req); err == nil {
			t.Fatal("the lost answer was not an error")
		}
		created, hidden = t0.Add(time.Second), true // the retry, before the cache shows the address
		clk.SetTime(created)
	}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var ips sdnv1.IPAddressList
	if err := api.List(context.Background(), &ips); err != nil || len(ips.Items) != 1 {
		t.Fatalf("made %d IPAddresses (%v), want its Auto one", len(ips.Items), err)
	}
	if record() != nil || res.RequeueAfter != plan.UnansweredGrace {
		t.Fatalf("reconcile that created it: record written %v, requeue after %v; want none, and a look when the grace ends (%v)",
			record() != nil, res.RequeueAfter, plan.UnansweredGrace)
	}

	hidden = false
	clk.SetTime(created.Add(plan.UnansweredGrace))
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	rec := record()
	if rec == nil || len(rec.Spec.Interfaces) != 1 || rec.Spec.Interfaces[0].Reason != string(evaluator.ReasonIPAddressPending) {
		t.Fatalf("UnansweredGrace after the create: record %+v; want corp reported %s", rec, evaluator.ReasonIPAddressPending)
	}
}
