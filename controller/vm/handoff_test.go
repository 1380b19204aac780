package vm

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// TestAStaticIPAddressIsHandedOverReleaseGraceAfterItsVMLetGo: VM a's networks-spec drops ip-s.
// For ReleaseGrace from that write, a holds it against every VM asking — b that waited for it,
// c created a moment later — whatever a's own reconciles ask meanwhile (atk20 F1: the carrier's
// reconcile erased the waiter's record); a VM that carries it itself is never held back; and
// the records expire (atk20 F2).
func TestAStaticIPAddressIsHandedOverReleaseGraceAfterItsVMLetGo(t *testing.T) {
	var h handoffs
	ip := types.NamespacedName{Namespace: "ns", Name: "ip-s"}
	t0 := time.Now()
	const grace = 5 * time.Second
	h.letGo("ns", "a", []string{"ip-s"}, t0, grace)
	steps := []struct {
		what     string
		at       time.Duration
		vm       string
		ranked   string
		carries  bool
		want     string
		wantWait time.Duration
	}{
		{"b, waiting for it", time.Second, "b", "b", false, "a", grace - time.Second},
		{"a's own reconcile", 2 * time.Second, "a", "a", false, "a", 0},
		{"b again", 2 * time.Second, "b", "b", false, "a", grace - 2*time.Second},
		{"c, new", 3 * time.Second, "c", "c", false, "a", grace - 3*time.Second},
		{"c ranked behind b", 3 * time.Second, "c", "b", false, "b", 0},
		{"b carries it already", 3 * time.Second, "b", "b", true, "b", 0},
		{"another address", 3 * time.Second, "b", "b", false, "b", 0},
		{"the grace is over", grace, "b", "b", false, "b", 0},
	}
	for _, st := range steps {
		key := ip
		if st.what == "another address" {
			key.Name = "ip-t"
		}
		got, wait := h.hold(key, st.vm, st.ranked, st.carries, t0.Add(st.at), grace)
		if got != st.want || wait != st.wantWait {
			t.Errorf("%s: held by %q, wait %v; want %q, %v", st.what, got, wait, st.want, st.wantWait)
		}
	}
	if len(h.by) != 0 {
		t.Errorf("handed over, yet recorded: %v", h.by)
	}
	h.letGo("ns", "a", []string{"ip-u"}, t0, grace)
	h.letGo("ns", "d", []string{"ip-v"}, t0.Add(grace), grace) // nobody asked for ip-u: it expires
	if _, ok := h.by[types.NamespacedName{Namespace: "ns", Name: "ip-u"}]; ok || len(h.by) != 1 {
		t.Errorf("an expired record stays: %v", h.by)
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
		p := &Plan{VMNetworksSpec: NetworksSpecWrite{Changed: c.changed, value: value}}
		if err := r.execute(context.Background(), &scope{vm: vm}, p); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		holder, _ := r.handoffs.hold(types.NamespacedName{Namespace: "ns", Name: "ip-s"}, "b", "b", false, r.now(), ReleaseGrace)
		if held := holder == "a"; held != c.want {
			t.Errorf("%s: held by a = %v, want %v", c.what, held, c.want)
		}
	}
}
