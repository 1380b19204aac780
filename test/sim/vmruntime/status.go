package vmruntime

import (
	"slices"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/sim/internal/mac"
)

// nicKey is a NIC's network, as status.networks entries are matched to spec.networks entries.
type nicKey struct {
	Type virtv1.NetworkType
	Name string
}

// ensureNetworks returns vm's status.networks with an entry for every spec.networks entry, the
// way the virtualization controller keeps it: existing entries stay where they are with all
// their fields (ipAddress and whatever else other writers put there); missing ones are appended
// with type, name and id; every entry for a spec NIC gets its deterministic macAddress when it
// has none. Nothing is removed.
func ensureNetworks(vm *virtv1.VirtualMachine) []virtv1.NetworksStatus {
	out := slices.Clone(vm.Status.Networks)
	claimed := make([]bool, len(out))
	nth := map[nicKey]int{}
	for _, n := range vm.Spec.Networks {
		k := nicKey{Type: n.Type, Name: n.Name}
		i := unclaimed(out, claimed, k)
		if i < 0 {
			out = append(out, virtv1.NetworksStatus{ID: n.ID, Type: n.Type, Name: n.Name,
				VirtualMachineMACAddressName: n.VirtualMachineMACAddressName})
			claimed = append(claimed, false)
			i = len(out) - 1
		}
		claimed[i] = true
		if out[i].MACAddress == "" {
			out[i].MACAddress = mac.NIC(vm.Namespace, vm.Name, string(n.Type), n.Name, nth[k])
		}
		nth[k]++
	}
	return out
}

// unclaimed is the index of the first entry of st for network k not claimed yet, or -1.
func unclaimed(st []virtv1.NetworksStatus, claimed []bool, k nicKey) int {
	for i, e := range st {
		if !claimed[i] && e.Type == k.Type && e.Name == k.Name {
			return i
		}
	}
	return -1
}
