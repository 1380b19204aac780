package virtualization

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// frozenCache makes s read VMs, records, KVVMs and operations from a cache that stopped
// following the API server at this moment, and the API server past it, as SetupWithManager
// wires a manager's cache and API reader. It returns a counter of the VM status updates s
// issues.
func frozenCache(t *testing.T, s *Simulator) *int {
	t.Helper()
	truth := s.Client
	snapshot := &virtv1.VirtualMachineList{}
	if err := truth.List(context.Background(), snapshot); err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for i := range snapshot.Items {
		objs = append(objs, &snapshot.Items[i])
	}
	s.Reader = fake.NewClientBuilder().WithScheme(truth.Scheme()).WithObjects(objs...).Build()
	s.live = truth
	updates := 0
	s.Client = interceptor.NewClient(truth.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			updates++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	return &updates
}

// A reconcile after the stand-in's own status write reads the VM past a cache that does not show
// that write yet: it neither writes the same status again nor updates under the stale version.
func TestACacheLaggingBehindTheStandInsOwnWriteIsReadPast(t *testing.T) {
	s, _ := newSim(t, newVM("vm", runPolicy(virtv1.RunPolicyAlwaysOff), networks(onCorp("corp"))))
	updates := frozenCache(t, s)
	if res := reconcileVM(t, s, "vm"); res.RequeueAfter != 0 {
		t.Fatalf("first reconcile = %+v, want done", res)
	}
	if *updates != 1 {
		t.Fatalf("status updates of the first reconcile = %d, want 1", *updates)
	}
	if res := reconcileVM(t, s, "vm"); res.RequeueAfter != 0 {
		t.Errorf("second reconcile = %+v, want done (a conflict from the stale cache is retried)", res)
	}
	if *updates != 1 {
		t.Errorf("status updates after the second reconcile = %d, want still 1: the cache's stale copy made it write again", *updates)
	}
}

// Once the cache shows the stand-in's write, it is read from the cache again.
func TestTheCacheIsReadOnceItShowsTheOwnWrite(t *testing.T) {
	s, _ := newSim(t, newVM("vm"))
	live := 0
	s.Reader = s.Client
	s.live = interceptor.NewClient(s.Client.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			live++
			return c.Get(ctx, key, obj, opts...)
		},
	})
	vm := getVM(t, s, "vm")
	s.wrote(vm) // the cache (the same fake client here) already shows it
	if _, _, err := s.getVM(context.Background(), types.NamespacedName{Namespace: ns, Name: "vm"}); err != nil {
		t.Fatal(err)
	}
	if live != 0 {
		t.Errorf("reads past the cache = %d, want 0 once the cache shows the write", live)
	}
}

// The watch event of exactly the stand-in's own last write brings no reconcile; every other
// version of the object does, and so does the same version delivered again.
func TestTheEchoOfTheStandInsOwnWriteIsDropped(t *testing.T) {
	s, _ := newSim(t)
	p := s.notOwnEcho()
	vm := func(rv string) *virtv1.VirtualMachine {
		return &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm", ResourceVersion: rv}}
	}
	raw := newUnstructured(vmKind)
	raw.SetNamespace(ns)
	raw.SetName("vm")
	raw.SetResourceVersion("7")
	s.wrote(raw)
	if !p.Update(event.UpdateEvent{ObjectOld: vm("5"), ObjectNew: vm("6")}) {
		t.Error("someone else's earlier write was dropped")
	}
	if p.Update(event.UpdateEvent{ObjectOld: vm("6"), ObjectNew: vm("7")}) {
		t.Error("the echo of the stand-in's own write (typed, written as unstructured) brought a reconcile")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: vm("7"), ObjectNew: vm("8")}) {
		t.Error("a later write was dropped")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: vm("6"), ObjectNew: vm("7")}) {
		t.Error("the echo was dropped twice")
	}
	if !p.Delete(event.DeleteEvent{Object: vm("7")}) {
		t.Error("a deletion was dropped")
	}
}
