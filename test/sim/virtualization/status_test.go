package virtualization

import (
	"reflect"
	"testing"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
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

func TestWaitingForSDN(t *testing.T) {
	corp := sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp"}
	lan := sdnv1.NetworksSpecEntry{Type: "Network", Name: "lan"}
	down := configuredNIC("old")
	down.Conditions[0].Status, down.Conditions[0].Reason = "False", "Configuration;Error"
	unknown := configuredNIC("corp")
	unknown.Conditions[1].Status, unknown.Conditions[1].Reason = "Unknown", ""
	tests := []struct {
		name string
		live []sdnv1.NetworksSpecEntry
		nics []sdnv1.NetworksStatusEntry
		want []consumer.Item
	}{
		{name: "every live entry reported and configured", live: []sdnv1.NetworksSpecEntry{corp}, nics: []sdnv1.NetworksStatusEntry{configuredNIC("corp")}},
		{name: "a live entry not reported", live: []sdnv1.NetworksSpecEntry{corp, lan}, nics: []sdnv1.NetworksStatusEntry{configuredNIC("corp")},
			want: []consumer.Item{{Label: "Network/lan", Reason: ReasonWaitingForSDN, Message: "waiting for SDN to report status"}}},
		{name: "a reported entry of the same name but another type is not the live one", live: []sdnv1.NetworksSpecEntry{{Type: "Network", Name: "corp"}},
			nics: []sdnv1.NetworksStatusEntry{configuredNIC("corp")},
			want: []consumer.Item{{Label: "Network/corp", Reason: ReasonWaitingForSDN, Message: "waiting for SDN to report status"}}},
		{name: "a live entry whose condition is not True", live: []sdnv1.NetworksSpecEntry{corp}, nics: []sdnv1.NetworksStatusEntry{unknown},
			want: []consumer.Item{{Label: "ClusterNetwork/corp", Reason: ReasonWaitingForSDN,
				Message: `SDN reports it not configured: Negotiated=Unknown ("")`}}},
		{name: "a reported entry not live whose condition is not True counts too, its reason quoted",
			live: []sdnv1.NetworksSpecEntry{corp}, nics: []sdnv1.NetworksStatusEntry{configuredNIC("corp"), down},
			want: []consumer.Item{{Label: "ClusterNetwork/old", Reason: ReasonWaitingForSDN,
				Message: `SDN reports it not configured: Configured=False ("Configuration\x3bError")`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := waitingForSDN(tt.live, tt.nics); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("waitingForSDN() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
