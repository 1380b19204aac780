package plan

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// TestHolderIsWhatRunsThenWhatVmipamDecided: a copy of a running VM's manifest, made in the same
// second with a name that sorts first, never takes the address. What runs decides; among pods
// carrying the address the one that has carried it longest holds; next the VM whose decision
// record attaches it (only vmipam writes records), never the newcomer by its name.
func TestHolderIsWhatRunsThenWhatVmipamDecided(t *testing.T) {
	created := metav1.NewTime(time.Unix(1000, 0))
	vm := func(name string) *vmv1.VirtualMachine {
		return &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}}
	}
	original, copied := vm("vm-s"), vm("vm-a")
	podSince := func(sec int64) *carrier {
		return &carrier{record: true, pod: true, since: metav1.NewTime(time.Unix(sec, 0))}
	}
	tests := []struct {
		name         string
		orig, copied *carrier
		want         string
	}{
		{"only the original's record attaches it", &carrier{record: true}, nil, "vm-s"},
		{"the copy's pod started later", podSince(1000), podSince(1003), "vm-s"},
		{"both pods started in the same second: the record, then the name, cannot tell them apart", podSince(1000), podSince(1000), "vm-a"},
		{"the copy's pod runs it, the original's does not", &carrier{record: true}, podSince(1001), "vm-a"},
		{"nothing carries it: the older VM, then the name", nil, nil, "vm-a"},
		// A record forged past the admission policy had the address hot-plugged onto the
		// copy's older pod; vmipam rewrote the record at once: the pod that carries it by
		// vmipam's decision keeps it (before, the older pod won and the original lost its NIC).
		{"the copy's older pod carries it without a record", podSince(1003), &carrier{pod: true, since: metav1.NewTime(time.Unix(1000, 0))}, "vm-s"},
	}
	for _, tt := range tests {
		if got := holder([]contender{{copied, tt.copied}, {original, tt.orig}}); got != tt.want {
			t.Errorf("%s: holder = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// Another VM's Auto IPAddress named as static is found carried although the indexes leave
// every VM's own Auto name out: VM x's pod carries its Auto IPAddress of corp and its record
// attaches it (its owner reference was removed, so nothing else refuses y the address), and
// x — not y — holds it.
func TestAnOwnAutoNameNamedAsStaticIsFoundWithoutTheIndexes(t *testing.T) {
	x := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "uid-x", CreationTimestamp: metav1.NewTime(t0)}}
	y := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "y", UID: "uid-y", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))}}
	ip := autoOf(x, "corp", "10.0.0.9")
	ip.OwnerReferences = nil
	spec := vmv1.NetworksSpec{Type: "ClusterNetwork", Name: "corp", IPAddressName: ip.Name}
	y.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, spec}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-x-1", CreationTimestamp: metav1.NewTime(t0),
		Labels: map[string]string{vmv1.LabelLauncherVMName: "x"}, Annotations: carrying(t, entryFor("corp", ip.Name))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	world := fakeWorld(t, x, y, &ip, pod, recordAttaching(x, "corp", &ip))

	var records v1alpha1.VirtualMachineIPAMList
	var pods corev1.PodList
	if err := world.List(context.Background(), &records, client.MatchingFields{index.RecordIPAddress: ip.Name}); err != nil {
		t.Fatal(err)
	}
	if err := world.List(context.Background(), &pods, client.MatchingFields{index.CarriedIPAddress: ip.Name}); err != nil {
		t.Fatal(err)
	}
	if len(records.Items)+len(pods.Items) != 0 {
		t.Errorf("the indexes hold x's own Auto name (%d records, %d pods), want it left out", len(records.Items), len(pods.Items))
	}

	h, _, err := observer{reader: world, now: t0}.holders(context.Background(), y, spec)
	if err != nil {
		t.Fatal(err)
	}
	if h.Holder != "x" || !slices.Equal(h.VMs, []string{"x"}) {
		t.Errorf("holders = %+v, want x holding it (its pod carries it)", h)
	}
}
