package vm

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// TestHolderIsWhatRunsNotWhatAnyoneCanWrite: a copy of a running VM's manifest, made in the same
// second with its networks-spec annotation and a name that sorts first, never takes the
// address. What runs decides; among pods carrying the address the one that has carried it
// longest holds; ties go to the VM whose status vmipam wrote with the address, never to the
// newcomer by its name.
func TestHolderIsWhatRunsNotWhatAnyoneCanWrite(t *testing.T) {
	spec := vmv1.NetworksSpec{Type: "ClusterNetwork", Name: "corp", IPAddressName: "ip-s"}
	created := metav1.NewTime(time.Unix(1000, 0))
	vm := func(name string) *vmv1.VirtualMachine {
		return &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}}
	}
	original, copied := vm("vm-s"), vm("vm-a")
	original.Status.Networks = []vmv1.NetworksStatus{{Type: "ClusterNetwork", Name: "corp", IPAddress: "10.0.0.30"}}
	podSince := func(sec int64) *carrier {
		return &carrier{annotation: true, pod: true, since: metav1.NewTime(time.Unix(sec, 0))}
	}
	tests := []struct {
		name         string
		orig, copied *carrier
		want         string
	}{
		{"only the copy's annotation carries it", podSince(1000), &carrier{annotation: true}, "vm-s"},
		{"the copy's pod started later", podSince(1000), podSince(1003), "vm-s"},
		{"both pods started in the same second: vmipam's status record", podSince(1000), podSince(1000), "vm-s"},
		{"nothing runs it: the annotation", &carrier{annotation: true}, nil, "vm-s"},
		{"the copy's pod runs it, the original's does not", &carrier{annotation: true}, podSince(1001), "vm-a"},
	}
	for _, tt := range tests {
		got := holder([]contender{{copied, tt.copied}, {original, tt.orig}}, spec, "10.0.0.30")
		if got != tt.want {
			t.Errorf("%s: holder = %s, want %s", tt.name, got, tt.want)
		}
	}
}
