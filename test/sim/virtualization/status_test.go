package virtualization

import (
	"reflect"
	"testing"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/sim/internal/mac"
)

func TestEnsureNetworks(t *testing.T) {
	corp := virtv1.NetworksSpec{Type: virtv1.NetworkTypeClusterNetwork, Name: "corp"}
	lan := virtv1.NetworksSpec{Type: virtv1.NetworkTypeNetwork, Name: "lan"}
	macOf := func(n virtv1.NetworksSpec, nth int) string { return mac.NIC(ns, "vm", string(n.Type), n.Name, nth) }
	tests := []struct {
		name   string
		spec   []virtv1.NetworksSpec
		status []virtv1.NetworksStatus
		want   []virtv1.NetworksStatus
	}{
		{
			name: "missing entries are added in spec order with a MAC",
			spec: []virtv1.NetworksSpec{corp, lan},
			want: []virtv1.NetworksStatus{
				{Type: corp.Type, Name: "corp", MACAddress: macOf(corp, 0)},
				{Type: lan.Type, Name: "lan", MACAddress: macOf(lan, 0)},
			},
		},
		{
			name:   "an existing MAC is kept; the address is written anew from SDN's answer (writeStatus)",
			spec:   []virtv1.NetworksSpec{corp},
			status: []virtv1.NetworksStatus{{Type: corp.Type, Name: "corp", MACAddress: "02:00:00:00:00:01", IPAddress: "10.0.0.10"}},
			want:   []virtv1.NetworksStatus{{Type: corp.Type, Name: "corp", MACAddress: "02:00:00:00:00:01"}},
		},
		{
			name:   "the list is rebuilt whole: entries the spec no longer has go",
			spec:   []virtv1.NetworksSpec{lan},
			status: []virtv1.NetworksStatus{{Type: corp.Type, Name: "corp", IPAddress: "10.0.0.10"}},
			want:   []virtv1.NetworksStatus{{Type: lan.Type, Name: "lan", MACAddress: macOf(lan, 0)}},
		},
		{
			name: "the same network twice gets two entries with different MACs",
			spec: []virtv1.NetworksSpec{corp, corp},
			want: []virtv1.NetworksStatus{
				{Type: corp.Type, Name: "corp", MACAddress: macOf(corp, 0)},
				{Type: corp.Type, Name: "corp", MACAddress: macOf(corp, 1)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ensureNetworks(newVM("vm", networks(tt.spec...), withStatusNetworks(tt.status...)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ensureNetworks() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
