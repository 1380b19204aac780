package vm

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// TestAStaticIPAddressIsHandedOverReleaseGraceAfterItsVMLetGo: VM a's networks-spec drops ip-s.
// For ReleaseGrace from that write, a holds it against every VM asking — b that waited for it,
// c created a moment later — whatever a's own reconciles ask meanwhile (atk20 F1: the carrier's
// reconcile erased the waiter's record), and whatever the asking VM let go of itself (atk21 N3:
// a copy whose annotation carried it); a VM whose pod carries it is never held back; and the
// records expire (atk20 F2), swept once a grace (atk21 N4).
func TestAStaticIPAddressIsHandedOverReleaseGraceAfterItsVMLetGo(t *testing.T) {
	var h handoffs
	ip := types.NamespacedName{Namespace: "ns", Name: "ip-s"}
	t0 := time.Now()
	const grace = 5 * time.Second
	h.letGo("ns", "a", []string{"ip-s"}, t0, grace)
	h.letGo("ns", "b", []string{"ip-s"}, t0.Add(time.Second/2), grace) // b's copied annotation, rewritten
	steps := []struct {
		what       string
		at         time.Duration
		vm         string
		ranked     string
		podCarries bool
		want       string
		wantWait   time.Duration
	}{
		{"b, waiting for it", time.Second, "b", "b", false, "a", grace - time.Second},
		{"a's own reconcile: b let go later", 2 * time.Second, "a", "a", false, "b", 3500 * time.Millisecond},
		{"b again", 2 * time.Second, "b", "b", false, "a", grace - 2*time.Second},
		{"c, new: the latest to let go holds", 3 * time.Second, "c", "c", false, "b", 2500 * time.Millisecond},
		{"c ranked behind b", 3 * time.Second, "c", "b", false, "b", 0},
		{"b's pod carries it already", 3 * time.Second, "b", "b", true, "b", 0},
		{"another address", 3 * time.Second, "b", "b", false, "b", 0},
		{"the grace is over", grace, "b", "b", false, "b", 0},
	}
	for _, st := range steps {
		key := ip
		if st.what == "another address" {
			key.Name = "ip-t"
		}
		got, wait := h.hold(key, st.vm, st.ranked, st.podCarries, t0.Add(st.at), grace)
		if got != st.want || wait != st.wantWait {
			t.Errorf("%s: held by %q, wait %v; want %q, %v", st.what, got, wait, st.want, st.wantWait)
		}
	}
	h.letGo("ns", "d", []string{"ip-v"}, t0.Add(2*grace), grace) // a grace on: the old records go
	if len(h.by) != 1 || h.by[types.NamespacedName{Namespace: "ns", Name: "ip-v"}] == nil {
		t.Errorf("expired records stay: %v", h.by)
	}
}

// TestExecuteStartsTheHandoffOfWhatTheVMsNetworksSpecDrops: the write of the VM's networks-spec
// without a static IPAddress starts its handoff, timed from that write; a pod's write does not
// (a new pod copies the VM's), nor does a VM write that keeps it.
func TestExecuteStartsTheHandoffOfWhatTheVMsNetworksSpecDrops(t *testing.T) {
	for _, c := range []struct {
		what    string
		vmValue string
		changed bool
		want    bool
	}{
		{"the VM's networks-spec drops it", "[]", true, true},
		{"the VM's networks-spec keeps it", "", true, false},
		{"only the pod's is written", "[]", false, false},
	} {
		vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u",
			Annotations: annotated(t, entryFor("corp", "ip-s"))}}
		value := c.vmValue
		if value == "" {
			value = vm.Annotations[sdnv1.AnnotationNetworksSpec]
		}
		cl := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm).WithStatusSubresource(vm).Build()
		r := &Reconciler{Client: cl, APIReader: cl}
		entries, err := sdnv1.ParseNetworksSpec(value)
		if err != nil {
			t.Fatal(err)
		}
		p := &Plan{VMNetworksSpec: NetworksSpecWrite{Entries: entries, Changed: c.changed, value: value}}
		if err := r.execute(context.Background(), &scope{vm: vm}, p); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		holder, _ := r.handoffs.hold(types.NamespacedName{Namespace: "ns", Name: "ip-s"}, "b", "b", false, r.now(), ReleaseGrace)
		if held := holder == "a"; held != c.want {
			t.Errorf("%s: held by a = %v, want %v", c.what, held, c.want)
		}
	}
}

// TestExecuteStartsTheHandoffWhenOnlyThePodWriteFails (atk21 N2): the VM's networks-spec
// without ip-s lands and the pod's write fails; the retry writes only the pod, the VM no longer
// changing. The handoff must have started with the VM's write.
func TestExecuteStartsTheHandoffWhenOnlyThePodWriteFails(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "u",
		Annotations: annotated(t, entryFor("corp", "ip-s"))}}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-a",
		Labels: map[string]string{vmv1.LabelLauncherVMName: "a"}, Annotations: annotated(t, entryFor("corp", "ip-s"))}}
	failed := false
	cl := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm, &pod).WithStatusSubresource(vm).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, isPod := obj.(*corev1.Pod); isPod && !failed {
				failed = true
				return apierrors.NewServiceUnavailable("injected")
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}).Build()
	r := &Reconciler{Client: cl, APIReader: cl}
	p := &Plan{VMNetworksSpec: NetworksSpecWrite{Changed: true, value: "[]"},
		Pods: []PodWrite{{NetworksSpecWrite: NetworksSpecWrite{Changed: true, value: "[]"}}}}
	if err := r.execute(context.Background(), &scope{vm: vm, pods: []corev1.Pod{pod}}, p); err == nil {
		t.Fatal("the pod's write did not fail")
	}
	written := vm.DeepCopy()
	written.Annotations = map[string]string{sdnv1.AnnotationNetworksSpec: "[]"}
	retry := &Plan{VMNetworksSpec: NetworksSpecWrite{value: "[]"},
		Pods: []PodWrite{{NetworksSpecWrite: NetworksSpecWrite{Changed: true, value: "[]"}}}}
	if err := r.execute(context.Background(), &scope{vm: written, pods: []corev1.Pod{pod}}, retry); err != nil {
		t.Fatal(err)
	}
	if holder, _ := r.handoffs.hold(types.NamespacedName{Namespace: "ns", Name: "ip-s"}, "b", "b", false, r.now(), ReleaseGrace); holder != "a" {
		t.Errorf("right after a's networks-spec dropped ip-s, b is held by %q; want a", holder)
	}
}
