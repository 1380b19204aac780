package vm

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// TestAnsweredIPAddressGoesFirst pins down the queue order that lets VMs become ready as SDN
// answers: an IPAddress update that carries SDN's answer enqueues its VM at AnsweredPriority,
// any other update at the default priority.
func TestAnsweredIPAddressGoesFirst(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm).Build()
	r := &Reconciler{Client: c}
	h := r.newAnsweredFirst()

	pending := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-ip", ResourceVersion: "1",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, vmv1.GroupVersion.WithKind("VirtualMachine"))}}}
	pending.Status.Phase = sdnv1.IPAddressPhasePending
	allocated := pending.DeepCopy()
	allocated.ResourceVersion = "2"
	allocated.Status.Phase, allocated.Status.Address = sdnv1.IPAddressPhaseAllocated, "10.0.0.5"
	relabelled := allocated.DeepCopy()
	relabelled.ResourceVersion, relabelled.Labels = "3", map[string]string{"team": "a"}

	for _, tt := range []struct {
		name     string
		old, new client.Object
		want     int
	}{
		{name: "SDN allocated the address", old: pending, new: allocated, want: AnsweredPriority},
		{name: "SDN took the address back", old: allocated, new: pending, want: AnsweredPriority},
		{name: "a label changed", old: allocated, new: relabelled, want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}, q)
			req, prio, _ := q.GetWithPriority()
			if req.Name != "web" || prio != tt.want {
				t.Errorf("enqueued %v at priority %d, want ns/web at %d", req, prio, tt.want)
			}
		})
	}
}
