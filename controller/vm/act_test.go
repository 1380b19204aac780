package vm

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
