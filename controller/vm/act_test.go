package vm

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// autoIP is vm's Auto IPAddress on ClusterNetwork corp as vmipam makes it.
func autoIP(vm *vmv1.VirtualMachine) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: "v-cn-corp-x", UID: types.UID("ip-uid"),
		Annotations:     map[string]string{plan.AnnotationInterface: "ClusterNetwork/corp"},
		OwnerReferences: []metav1.OwnerReference{plan.VMOwnerRef(vm)}},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: "corp"}}}
}

// TestADeleteWaitsWhileTheLiveVMOrAPodStillNamesTheIPAddress: the plan decided from the cache;
// right before deleting, the live VM's spec and its launcher pods (a terminating one too) are
// read past it, and an IPAddress any of them still names is kept for a later reconcile.
func TestADeleteWaitsWhileTheLiveVMOrAPodStillNamesTheIPAddress(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	for _, holder := range []string{"the VM's spec", "a terminating pod", "nobody"} {
		live := vm.DeepCopy()
		ip := autoIP(vm)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-v-x",
			Labels: map[string]string{vmv1.LabelLauncherVMName: "v"}, Finalizers: []string{"guest"}}}
		switch holder {
		case "the VM's spec":
			live.Spec.Networks = []vmv1.NetworksSpec{{Type: "ClusterNetwork", Name: "corp", IPAddressName: ip.Name}}
		case "a terminating pod":
			pod.Annotations = map[string]string{sdnv1.AnnotationNetworksSpec: `[{"type":"ClusterNetwork","name":"corp","ifName":"x","ipAddressNames":["` + ip.Name + `"]}]`}
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(live, pod, ip).Build()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), ip); err != nil {
			t.Fatal(err)
		}
		r := &Reconciler{Client: c, APIReader: c}
		if _, err := r.execute(context.Background(), vm, &plan.Plan{Releases: []*sdnv1.IPAddress{ip}}); err != nil {
			t.Fatal(err)
		}
		err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), &sdnv1.IPAddress{})
		if gone := apierrors.IsNotFound(err); gone != (holder == "nobody") {
			t.Errorf("named by %s: deleted = %v", holder, gone)
		}
	}
}

// TestAFailedRecordWriteDeletesNothing: the record goes before the deletes, so that a consumer
// never names an IPAddress that is gone; when it fails, nothing is deleted and the retry starts
// over.
func TestAFailedRecordWriteDeletesNothing(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	ip := autoIP(vm)
	deletes := 0
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm, ip).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("the API server is gone")
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes++
			return c.Delete(ctx, obj, opts...)
		}}).Build()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), ip); err != nil {
		t.Fatal(err)
	}
	rec := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v",
		OwnerReferences: []metav1.OwnerReference{plan.VMOwnerRef(vm)}}, Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: "u"}}
	p := &plan.Plan{Record: rec, RecordChanged: true, Releases: []*sdnv1.IPAddress{ip}}
	if _, err := (&Reconciler{Client: c, APIReader: c}).execute(context.Background(), vm, p); err == nil {
		t.Fatal("execute swallowed the failed record write")
	}
	if deletes != 0 {
		t.Errorf("%d deletes after the record write failed, want none", deletes)
	}
}

// The record's patch is conditional on what vmipam writes, not on the resourceVersion: it
// applies over the consumer's status write that came after the version it was computed from
// (the spec and owner references become the written ones, the status stays), and it fails
// when another writer changed the spec meanwhile.
func TestTheRecordPatchIgnoresStatusWritesAndRefusesSpecChanges(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	observed := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", Generation: 3, UID: "rec",
		OwnerReferences: []metav1.OwnerReference{plan.VMOwnerRef(vm)}}, Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: "u", VMGeneration: 1}}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(observed).WithStatusSubresource(observed).Build()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(observed), observed); err != nil {
		t.Fatal(err)
	}
	consumer := observed.DeepCopy()
	consumer.Status.ObservedGeneration = 3
	if err := c.Status().Update(ctx, consumer); err != nil {
		t.Fatal(err)
	}

	written := observed.DeepCopy()
	written.Spec.VMGeneration = 2
	written.OwnerReferences = append(written.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "cm"})
	r := &Reconciler{Client: c, APIReader: c}
	if err := r.patchRecord(ctx, observed, written.DeepCopy()); err != nil {
		t.Fatalf("patch over the consumer's status write: %v", err)
	}
	got := &v1alpha1.VirtualMachineIPAM{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(observed), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.VMGeneration != 2 || len(got.OwnerReferences) != 2 || got.Status.ObservedGeneration != 3 {
		t.Errorf("after the patch: spec.vmGeneration %d, %d owner references, status.observedGeneration %d; want 2, 2, 3",
			got.Spec.VMGeneration, len(got.OwnerReferences), got.Status.ObservedGeneration)
	}

	stale := got.DeepCopy()
	stale.Generation-- // decided from a version before another spec write
	if err := r.patchRecord(ctx, stale, written.DeepCopy()); err == nil {
		t.Error("a patch computed before another writer's spec change was applied")
	}
	other := got.DeepCopy()
	other.UID = "an-earlier-record" // decided from a record since deleted and made again
	if err := r.patchRecord(ctx, other, written.DeepCopy()); err == nil {
		t.Error("a patch computed from another record of the same name was applied")
	}
}

// The API server answers a JSON patch whose test failed with a bare 422 (k8s.io/apiserver's
// patch handler, as for every error of applying one): vmipam treats it as the conflict it is
// when the live record changed since it was read, and as the refusal it is when it did not.
func TestAFailedRecordPatchIsAConflictOnlyWhenTheRecordChanged(t *testing.T) {
	refused := apierrors.NewGenericServerResponse(422, "", schema.GroupResource{}, "", "testing value /metadata/generation failed: test failed", 0, false)
	live := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", Generation: 2}}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(live).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return refused
		},
	}).Build()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(live), live); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: c, APIReader: c}
	stale := live.DeepCopy()
	stale.Generation = 1
	if err := r.patchRecord(context.Background(), stale, stale.DeepCopy()); !apierrors.IsConflict(err) {
		t.Errorf("record changed since read: error %v, want a Conflict", err)
	}
	if err := r.patchRecord(context.Background(), live, live.DeepCopy()); apierrors.IsConflict(err) || !apierrors.IsInvalid(err) {
		t.Errorf("record as read: error %v, want the 422 itself", err)
	}
}

// A release is deleted under the resourceVersion it was decided from; SDN's status write in
// between (Attached turning False as the pod lets go of the address) does not stop it, while a
// status that shows a pod using the address (one made from an older read) or an edit of what
// vmipam decided from — the owner reference removed, adopting the address — does. The former
// returns a Conflict, so that the VM comes back: SDN's next status write (the pod let go) changes
// nothing vmipam reads and would wake nobody — an IPAddress kept forever, seen once in CI.
func TestAReleaseIsDeletedOverSDNsStatusWriteButNotOverAnEdit(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	for _, tc := range []struct {
		name      string
		edit      func(ctx context.Context, c client.Client, ip *sdnv1.IPAddress) error
		wantGone  bool
		wantRetry bool
	}{
		{"SDN's status write", func(ctx context.Context, c client.Client, ip *sdnv1.IPAddress) error {
			ip.Status.Phase = sdnv1.IPAddressPhaseAllocated
			return c.Status().Update(ctx, ip)
		}, true, false},
		{"SDN's status write that a pod uses it", func(ctx context.Context, c client.Client, ip *sdnv1.IPAddress) error {
			ip.Status.UsedByPods = []apiextensionsv1.JSON{{Raw: []byte(`{"namespace":"ns","name":"virt-launcher-v-late"}`)}}
			return c.Status().Update(ctx, ip)
		}, false, true},
		{"an adoption", func(ctx context.Context, c client.Client, ip *sdnv1.IPAddress) error {
			ip.OwnerReferences = nil
			return c.Update(ctx, ip)
		}, false, false},
	} {
		ip := autoIP(vm)
		c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(ip).WithStatusSubresource(ip).Build()
		ctx := context.Background()
		decided := &sdnv1.IPAddress{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(ip), decided); err != nil {
			t.Fatal(err)
		}
		if err := tc.edit(ctx, c, decided.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if err := (&Reconciler{Client: c, APIReader: c}).delete(ctx, vm, decided); apierrors.IsConflict(err) != tc.wantRetry ||
			(err != nil && !tc.wantRetry) {
			t.Fatalf("%s: error %v, want a Conflict (the VM retried) %v", tc.name, err, tc.wantRetry)
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(ip), &sdnv1.IPAddress{})
		if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
			t.Errorf("after %s: deleted = %v, want %v", tc.name, gone, tc.wantGone)
		}
	}
}
