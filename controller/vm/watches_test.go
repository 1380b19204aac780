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

// TestVMStatusChangesThatShowNothing pins down which status updates of the virtualization
// controller bring a VM back: only those of what vmipam reads (the phase, each entry's network
// and MAC), never its conditions or the addresses it reports.
func TestVMStatusChangesThatShowNothing(t *testing.T) {
	base := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1"},
		Status: vmv1.VirtualMachineStatus{Phase: vmv1.PhaseRunning,
			Networks: []vmv1.NetworksStatus{{Type: vmv1.NetworkTypeNetwork, Name: "n", IPAddress: "10.0.0.5", MACAddress: "02:00:00:00:00:01"}},
			Conditions: []metav1.Condition{{Type: "NetworkReady", Status: metav1.ConditionTrue, Reason: "NetworkReady"},
				{Type: "AgentReady", Status: metav1.ConditionFalse, Reason: "NoAgent"}}}}
	for _, tt := range []struct {
		name   string
		change func(*vmv1.VirtualMachineStatus)
		want   bool
	}{
		{"NetworkReady changed", func(st *vmv1.VirtualMachineStatus) { st.Conditions[0].Status = metav1.ConditionFalse }, false},
		{"another writer's condition", func(st *vmv1.VirtualMachineStatus) { st.Conditions[1].Status = metav1.ConditionTrue }, false},
		{"observedGeneration", func(st *vmv1.VirtualMachineStatus) { st.ObservedGeneration = 3 }, false},
		{"ipAddress cleared", func(st *vmv1.VirtualMachineStatus) { st.Networks[0].IPAddress = "" }, false},
		{"phase", func(st *vmv1.VirtualMachineStatus) { st.Phase = vmv1.PhaseStopped }, true},
		{"macAddress changed (a policy input)", func(st *vmv1.VirtualMachineStatus) { st.Networks[0].MACAddress = "02:00:00:00:00:02" }, true},
		{"entry added", func(st *vmv1.VirtualMachineStatus) {
			st.Networks = append(st.Networks, vmv1.NetworksStatus{Type: vmv1.NetworkTypeMain})
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			updated := base.DeepCopy()
			updated.ResourceVersion = "2"
			tt.change(&updated.Status)
			if got := changed(base, updated); got != tt.want {
				t.Errorf("changed = %v, want %v", got, tt.want)
			}
		})
	}
}
