package vm

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// TestAnsweredIPAddressGoesFirst pins down the queue order that lets VMs become ready as SDN
// answers: an IPAddress update that carries SDN's answer enqueues its VM at AnsweredPriority,
// another update of what vmipam reads at the default priority, and an update of nothing it
// reads (a label, SDN's Attached condition) not at all.
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
	reasoned := allocated.DeepCopy()
	reasoned.ResourceVersion = "4"
	reasoned.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionTrue, Reason: "IPAddressAllocated"}}

	for _, tt := range []struct {
		name     string
		old, new client.Object
		want     int
	}{
		{name: "SDN allocated the address", old: pending, new: allocated, want: AnsweredPriority},
		{name: "SDN took the address back", old: allocated, new: pending, want: AnsweredPriority},
		{name: "its Allocated condition changed", old: allocated, new: reasoned, want: 0},
		{name: "a label changed", old: allocated, new: relabelled, want: -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := priorityqueue.New[reconcile.Request]("test")
			defer q.ShutDown()
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}, q)
			if tt.want < 0 {
				if n := q.Len(); n != 0 {
					t.Errorf("%d requests enqueued, want none", n)
				}
				return
			}
			req, prio, _ := q.GetWithPriority()
			if req.Name != "web" || prio != tt.want {
				t.Errorf("enqueued %v at priority %d, want ns/web at %d", req, prio, tt.want)
			}
		})
	}
}

// TestAnAnswerWaitsForItsSiblings: SDN's answer to one of a VM's Auto IPAddresses while
// another is still unanswered enqueues the VM SiblingAnswerWait later (its reconcile could only
// defer the record); the answer to the last one enqueues it at once, and the two make one
// reconcile. An unanswered address being deleted holds nothing back.
func TestAnAnswerWaitsForItsSiblings(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	created := metav1.NewTime(time.Unix(1_800_000_000, 0))
	auto := func(name string) *sdnv1.IPAddress {
		return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1", CreationTimestamp: created,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, vmv1.GroupVersion.WithKind("VirtualMachine"))}}}
	}
	answer := func(ip *sdnv1.IPAddress) *sdnv1.IPAddress {
		out := ip.DeepCopy()
		out.ResourceVersion = "2"
		out.Status.Phase, out.Status.Address = sdnv1.IPAddressPhaseAllocated, "10.0.0.5"
		return out
	}
	enqueue := func(t *testing.T, q priorityqueue.PriorityQueue[reconcile.Request], objs []client.Object, old, new client.Object) {
		t.Helper()
		b := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(objs...)
		if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
			t.Fatal(err)
		}
		h := (&Reconciler{Client: b.Build()}).newAnsweredFirst()
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: new}, q)
	}
	a, b := auto("web-a"), auto("web-b")

	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	enqueue(t, q, []client.Object{vm, answer(a), b}, a, answer(a))
	if n := q.Len(); n != 0 {
		t.Fatalf("first answer, web-b unanswered: %d requests ready at once, want the VM waiting", n)
	}
	enqueue(t, q, []client.Object{vm, answer(a), answer(b)}, b, answer(b))
	if n := q.Len(); n != 1 {
		t.Fatalf("last answer: %d requests ready, want the VM once", n)
	}
	if req, prio, _ := q.GetWithPriority(); req.Name != "web" || prio != AnsweredPriority {
		t.Errorf("enqueued %v at %d, want ns/web at AnsweredPriority", req, prio)
	}
	q.Done(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "web"}})
	if n := q.Len(); n != 0 {
		t.Errorf("%d more requests ready after the VM's reconcile, want the two answers to make one", n)
	}

	deleting := b.DeepCopy()
	deleting.DeletionTimestamp, deleting.Finalizers = ptr.To(metav1.Now()), []string{"test"}
	older := b.DeepCopy() // left unanswered since long before web-a: a network SDN does not serve
	older.CreationTimestamp = metav1.NewTime(created.Add(-time.Minute))
	// Created by the same reconcile, a whole second apart in the creation timestamps' seconds.
	secondBefore := b.DeepCopy()
	secondBefore.CreationTimestamp = metav1.NewTime(created.Add(-time.Second))
	q3 := priorityqueue.New[reconcile.Request]("test3")
	defer q3.ShutDown()
	enqueue(t, q3, []client.Object{vm, answer(a), secondBefore}, a, answer(a))
	if n := q3.Len(); n != 0 {
		t.Errorf("web-b created in the second before web-a: %d requests ready at once, want the VM waiting", n)
	}
	for name, sibling := range map[string]*sdnv1.IPAddress{"being deleted": deleting, "created a minute before": older} {
		q := priorityqueue.New[reconcile.Request](name)
		enqueue(t, q, []client.Object{vm, answer(a), sibling}, a, answer(a))
		if n := q.Len(); n != 1 {
			t.Errorf("web-b %s: %d requests ready, want the VM at once", name, n)
		}
		q.ShutDown()
	}
}

// TestAnOwnCreationAfterTheStallNoticeBringsItsVMBack: the creation of an IPAddress vmipam
// created itself wakes only the VMs naming it — unless it appears unanswered on a network whose
// stall notice has been taken already (backlog.Tracker.Stalled): the notice did not see it,
// and the creating reconcile may have planned to wait up to plan.BacklogGrace.
func TestAnOwnCreationAfterTheStallNoticeBringsItsVMBack(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-a", ResourceVersion: "1",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, vmv1.GroupVersion.WithKind("VirtualMachine"))}}}
	for _, stalled := range []bool{false, true} {
		b := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm)
		if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
			t.Fatal(err)
		}
		r := &Reconciler{Client: b.Build(), SDNStalled: func(*sdnv1.IPAddress) bool { return stalled }}
		h := r.newAnsweredFirst()
		r.expectations().expectCreated(ip.DeepCopy())
		q := priorityqueue.New[reconcile.Request]("test")
		h.Create(context.Background(), event.CreateEvent{Object: ip.DeepCopy()}, q)
		if got, want := q.Len(), map[bool]int{false: 0, true: 1}[stalled]; got != want {
			t.Errorf("network stalled %v: %d requests, want %d", stalled, got, want)
		}
		q.ShutDown()
		answered := ip.DeepCopy() // SDN answered before the cache showed it: nothing waits
		answered.Name, answered.Status.Phase = "web-b", sdnv1.IPAddressPhaseAllocated
		r.expectations().expectCreated(answered.DeepCopy())
		q = priorityqueue.New[reconcile.Request]("answered")
		h.Create(context.Background(), event.CreateEvent{Object: answered}, q)
		if n := q.Len(); n != 0 {
			t.Errorf("network stalled %v, the creation already answered: %d requests, want none", stalled, n)
		}
		q.ShutDown()
	}
}

// TestContendersAreTheOtherVMs pins down that a VM's own change, its pod's and its record's
// reach the VMs contending for its static IPAddresses but never the VM itself through those
// paths (its own watches bring it, filtered by what it reads), and that a status update of the
// virtualization controller reaches no contender.
func TestContendersAreTheOtherVMs(t *testing.T) {
	named := func(name string) *vmv1.VirtualMachine {
		return &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec: vmv1.VirtualMachineSpec{Networks: []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeClusterNetwork, Name: "corp", IPAddressName: "shared"}}}}
	}
	web, db := named("web"), named("db")
	b := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(web, db)
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: b.Build()}
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-web-x",
		Labels:      map[string]string{vmv1.LabelLauncherVMName: "web"},
		Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: `[{"type":"ClusterNetwork","name":"corp","ipAddressNames":["shared"]}]`}}}
	rec := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1alpha1.VirtualMachineIPAMSpec{Interfaces: []v1alpha1.InterfaceDecision{
			{Type: "ClusterNetwork", Name: "corp", Allocation: v1alpha1.AllocationStatic, IPAddressName: "shared", Attach: true}}}}
	want := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "db"}}}
	for name, got := range map[string][]reconcile.Request{
		"peersOfVM": r.peersOfVM(ctx, web), "contendersOfPod": r.contendersOfPod(ctx, pod), "contendersOfRecord": r.contendersOfRecord(ctx, rec),
	} {
		if !slices.Equal(got, want) {
			t.Errorf("%s(web's) = %v, want only %v", name, got, want)
		}
	}

	statusOnly := web.DeepCopy()
	statusOnly.Status.Phase = vmv1.PhaseRunning
	moved := web.DeepCopy()
	moved.Spec.Networks[0].IPAddressName = "other"
	p := contendsChanged()
	if p.Update(event.UpdateEvent{ObjectOld: web, ObjectNew: statusOnly}) {
		t.Error("a status update reaches the contenders")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: web, ObjectNew: moved}) {
		t.Error("a VM naming another IPAddress does not reach the contenders")
	}
}

// TestStaticHandoffStartWakesTheWaiters: a record that stops attaching a static IPAddress and
// starts handing it over names the address in both versions; the VMs waiting for it must hear
// of that update (its handoff starts), and of no update that changes neither list.
func TestStaticHandoffStartWakesTheWaiters(t *testing.T) {
	attaching := &v1alpha1.VirtualMachineIPAM{Spec: v1alpha1.VirtualMachineIPAMSpec{Interfaces: []v1alpha1.InterfaceDecision{
		{Type: "ClusterNetwork", Name: "corp", Allocation: v1alpha1.AllocationStatic, Attach: true, IPAddressName: "s"}}}}
	releasing := &v1alpha1.VirtualMachineIPAM{Spec: v1alpha1.VirtualMachineIPAMSpec{Releases: []v1alpha1.Release{
		{Type: v1alpha1.ReleaseStatic, IPAddressName: "s", Since: metav1.NowMicro()}}}}
	relabelled := attaching.DeepCopy()
	relabelled.Labels = map[string]string{"example.com/x": "y"}
	p := staticNamesChanged()
	for _, tt := range []struct {
		name     string
		old, new *v1alpha1.VirtualMachineIPAM
		want     bool
	}{
		{"attach → hand over", attaching, releasing, true},
		{"hand over → attach", releasing, attaching, true},
		{"nothing static changed", attaching, relabelled, false},
	} {
		if got := p.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new}); got != tt.want {
			t.Errorf("%s: passed = %v, want %v", tt.name, got, tt.want)
		}
	}
}
