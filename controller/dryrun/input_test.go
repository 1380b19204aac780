package dryrun_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// vlanCorp is corp as a VLAN ClusterNetwork on the workers' NICs, as SDN's documentation and
// the virtualization e2e tests write one.
const vlanCorp = `{apiVersion: network.deckhouse.io/v1alpha1, kind: ClusterNetwork, metadata: {name: corp},
  spec: {type: VLAN, vlan: {id: 900}, parentNodeNetworkInterfaces: {labelSelector: {matchLabels: {nic-group: extra}}},
         ipam: {ipAddressPoolRef: {kind: ClusterIPAddressPool, name: corp-pool}}},
  status: {conditions: [` + readyCondition + `]}}`

// The dry run shows policies' input: the network's type, and the interface's MAC from the
// live VM's status.networks (what the virtualization controller wrote).
func TestTheTraceShowsTheNetworkTypeAndTheMAC(t *testing.T) {
	e := newEngine(t)
	live := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "uid-web"},
		Spec: vmv1.VirtualMachineSpec{Networks: []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeMain}, {Type: vmv1.NetworkTypeClusterNetwork, Name: "corp"}}},
		Status: vmv1.VirtualMachineStatus{Phase: vmv1.PhaseRunning, Networks: []vmv1.NetworksStatus{
			{Type: vmv1.NetworkTypeMain, MACAddress: "02:00:00:00:00:00"},
			{Type: vmv1.NetworkTypeClusterNetwork, Name: "corp", MACAddress: "02:5e:4c:00:00:01"}}}}
	res := evaluate(t, e, fakeCluster(t, live), nil, vmOnCorp+"objects: ["+vlanCorp+"]")
	in := res.Interfaces[0].Decision.Trace.Input
	if in == nil || in.Network.Type != "VLAN" || in.Interface.MACAddress != "02:5e:4c:00:00:01" {
		t.Errorf("trace.input = %+v, want network.type VLAN and interface.macAddress 02:5e:4c:00:00:01", in)
	}
}
