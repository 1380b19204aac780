package plan

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// The policy input carries the interface's MAC, from the status.networks entry matched to its
// spec entry as status entries are matched (type and name, repeated entries in order, whatever
// the order of the status list), and its network's type.
func TestThePolicyInputCarriesTheMACAndTheNetworkType(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v"}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeMain}, {Type: "ClusterNetwork", Name: "corp"},
		{Type: "Network", Name: "lan"}, {Type: "ClusterNetwork", Name: "corp"}, {Type: "ClusterNetwork", Name: "new"}}
	vm.Status.Networks = []vmv1.NetworksStatus{{Type: "Network", Name: "lan", MACAddress: "02:00:00:00:00:02"},
		{Type: vmv1.NetworkTypeMain, MACAddress: "02:00:00:00:00:00"},
		{Type: "ClusterNetwork", Name: "corp", MACAddress: "02:00:00:00:00:01"},
		{Type: "ClusterNetwork", Name: "corp", MACAddress: "02:00:00:00:00:03"}}
	s := &scope{vm: vm}
	for i, want := range map[int]string{1: "02:00:00:00:00:01", 2: "02:00:00:00:00:02", 3: "02:00:00:00:00:03", 4: ""} {
		it := &iface{index: i, spec: vm.Spec.Networks[i], dupOf: -1, network: &networkInfo{exists: true, typ: "VLAN"}}
		in := input(s, it, nil)
		if in.Interface.MACAddress != want || in.Network.Type != "VLAN" {
			t.Errorf("spec.networks[%d]: macAddress %q, network.type %q; want %q, VLAN", i, in.Interface.MACAddress, in.Network.Type, want)
		}
	}
}
