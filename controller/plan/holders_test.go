package plan

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
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
