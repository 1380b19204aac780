package vm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/overlay"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// TestExecuteDeletesOnlyAfterTheNetworksSpecNoLongerNamesTheIPAddress: SDN must never see a VM
// or running pod naming an IPAddress that is gone, and a failed networks-spec write must leave
// the IPAddress in place for the retry. The delete carries the UID and resourceVersion seen, so
// that a concurrent edit wins. The VM's and the pod's patches are issued side by side, in
// either order.
func TestExecuteDeletesOnlyAfterTheNetworksSpecNoLongerNamesTheIPAddress(t *testing.T) {
	for _, podFails := range []bool{false, true} {
		var mu sync.Mutex
		vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-v-x"}}
		auto := autoOf(vm, "corp", "10.0.0.5")
		ip := &auto
		ip.ResourceVersion = ""
		var writes []string
		c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm, pod, ip).
			WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					mu.Lock()
					writes = append(writes, "patch "+obj.GetName())
					mu.Unlock()
					if _, isPod := obj.(*corev1.Pod); isPod && podFails {
						return errors.New("pod patch refused")
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					o := (&client.DeleteOptions{}).ApplyOptions(opts)
					if pre := o.Preconditions; pre == nil || pre.UID == nil || pre.ResourceVersion == nil || *pre.ResourceVersion != obj.GetResourceVersion() {
						t.Errorf("delete of %s without UID and resourceVersion preconditions: %+v", obj.GetName(), pre)
					}
					writes = append(writes, "delete "+obj.GetName())
					return c.Delete(ctx, obj, opts...)
				},
			}).Build()
		r := &Reconciler{Client: c, APIReader: c}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), ip); err != nil {
			t.Fatal(err)
		}
		unnamedFor(r, vm, ip, ReleaseGrace)
		s := &scope{vm: vm, pods: []corev1.Pod{*pod}, owned: []sdnv1.IPAddress{*ip}}
		p := &Plan{DeleteIPAddresses: []string{ip.Name},
			VMNetworksSpec: NetworksSpecWrite{Changed: true, value: "[]"},
			Pods:           []PodWrite{{NetworksSpecWrite: NetworksSpecWrite{Changed: true, value: "[]"}}}}
		err := r.execute(context.Background(), s, p)
		want := []string{"patch v", "patch virt-launcher-v-x", "delete " + ip.Name}
		if podFails {
			want = want[:2]
		}
		if len(writes) >= 2 {
			slices.Sort(writes[:2]) // the two patches, in either order
		}
		if !slices.Equal(writes, want) || (err != nil) != podFails {
			t.Errorf("pod patch fails=%v: writes %v, error %v; want %v", podFails, writes, err, want)
		}
	}
}

// TestExecuteDeletesNothingWhenTheStatusWriteFails: the status write and the reads that guard
// the deletes go side by side, and the deletes wait for both: a failed status write deletes
// nothing, so status never keeps naming an address that is gone (issue #16 took the reads
// off the chain after the status write; this keeps what that order guaranteed).
func TestExecuteDeletesNothingWhenTheStatusWriteFails(t *testing.T) {
	for _, statusFails := range []bool{false, true} {
		vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
		auto := autoOf(vm, "corp", "10.0.0.5")
		ip := &auto
		ip.ResourceVersion = ""
		var mu sync.Mutex
		var writes []string
		record := func(w string) {
			mu.Lock()
			defer mu.Unlock()
			writes = append(writes, w)
		}
		c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm, ip).WithStatusSubresource(vm).
			WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					record("patch status")
					if statusFails {
						return errors.New("status patch refused")
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					record("delete " + obj.GetName())
					return c.Delete(ctx, obj, opts...)
				},
			}).Build()
		r := &Reconciler{Client: c, APIReader: c}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), ip); err != nil {
			t.Fatal(err)
		}
		unnamedFor(r, vm, ip, ReleaseGrace)
		s := &scope{vm: vm, owned: []sdnv1.IPAddress{*ip}}
		p := &Plan{DeleteIPAddresses: []string{ip.Name}, StatusChanged: true,
			Status: vmv1.VirtualMachineStatus{Networks: []vmv1.NetworksStatus{{Type: vmv1.NetworkTypeMain}}}}
		err := r.execute(context.Background(), s, p)
		want := []string{"patch status", "delete " + ip.Name}
		if statusFails {
			want = want[:1]
		}
		if !slices.Equal(writes, want) || (err != nil) != statusFails {
			t.Errorf("status patch fails=%v: writes %v, error %v; want %v", statusFails, writes, err, want)
		}
	}
}

// TestEvaluateAfterTheDeadlineIsAnErrorNotAnAnswer: a dry run whose time ran out must not
// answer with decisions cut short (they would be PolicyErrors or missing).
func TestEvaluateAfterTheDeadlineIsAnErrorNotAnAnswer(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	for i := range 50 {
		vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: "ClusterNetwork", Name: fmt.Sprint("n", i)})
	}
	reader := overlay.New(nil, runtimeScheme(t))
	if err := index.Setup(context.Background(), reader); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := Evaluate(ctx, reader, builtinSet(t).Set(), vm, evaluator.Options{}); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Evaluate after the deadline = %v, %v; want context.Canceled", p, err)
	}
	if p, err := Evaluate(context.Background(), reader, builtinSet(t).Set(), vm, evaluator.Options{}); err != nil || len(p.Interfaces) != 50 {
		t.Errorf("Evaluate in time = %v, %v; want 50 interfaces", p, err)
	}
}

// TestADeleteWaitsWhileTheLiveVMOrAPodStillNamesTheIPAddress: the plan decided from the cache;
// right before deleting, the live VM and launcher pods (a terminating one too) are read past it,
// and an IPAddress any of them still names is kept for a later reconcile.
func TestADeleteWaitsWhileTheLiveVMOrAPodStillNamesTheIPAddress(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	auto := autoOf(vm, "corp", "10.0.0.5")
	auto.ResourceVersion = ""
	for _, holder := range []string{"vm", "terminating pod", "nobody"} {
		live := vm.DeepCopy()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-v-x",
			Labels: map[string]string{vmv1.LabelLauncherVMName: "v"}, Finalizers: []string{"guest"}}}
		switch holder {
		case "vm":
			live.Annotations = annotated(t, entryFor("corp", auto.Name))
		case "terminating pod":
			pod.Annotations = annotated(t, entryFor("corp", auto.Name))
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		ip := auto.DeepCopy()
		c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(live, pod, ip).Build()
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), ip); err != nil {
			t.Fatal(err)
		}
		r := &Reconciler{Client: c, APIReader: c}
		unnamedFor(r, vm, ip, ReleaseGrace)
		s := &scope{vm: vm, owned: []sdnv1.IPAddress{*ip}} // the cache shows nobody naming it
		if err := r.execute(context.Background(), s, &Plan{DeleteIPAddresses: []string{ip.Name}}); err != nil {
			t.Fatal(err)
		}
		err := c.Get(context.Background(), client.ObjectKeyFromObject(ip), &sdnv1.IPAddress{})
		if gone := apierrors.IsNotFound(err); gone != (holder == "nobody") {
			t.Errorf("named by %s: deleted = %v", holder, gone)
		}
	}
}
