package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// holders finds the other VMs of the namespace that name the same static IPAddress on the same
// network, and which VM holds it (DESIGN.md §4.4): the one whose networks-spec already carries
// it, else the oldest (creation time, then name). Every contender computes the same holder, so
// exactly one of them attaches the address and the current holder always keeps it.
func (r *Reconciler) holders(ctx context.Context, vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec) (evaluator.Holders, error) {
	var list vmv1.VirtualMachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(vm.Namespace),
		client.MatchingFields{index.VMIPAddressName: spec.IPAddressName}); err != nil {
		return evaluator.Holders{}, fmt.Errorf("list VMs naming IPAddress %s: %w", spec.IPAddressName, err)
	}
	contenders := []*vmv1.VirtualMachine{vm}
	others := []string{}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == vm.UID || other.DeletionTimestamp != nil || !namesOnNetwork(other, spec) {
			continue
		}
		contenders = append(contenders, other)
		others = append(others, other.Name)
	}
	slices.Sort(others)
	return evaluator.Holders{VMs: others, Holder: holder(contenders, spec.IPAddressName)}, nil
}

// namesOnNetwork reports whether vm names the IPAddress of spec on the network of spec.
func namesOnNetwork(vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec) bool {
	for _, n := range vm.Spec.Networks {
		if n.Type == spec.Type && n.Name == spec.Name && n.IPAddressName == spec.IPAddressName {
			return true
		}
	}
	return false
}

func holder(contenders []*vmv1.VirtualMachine, ipAddressName string) string {
	slices.SortFunc(contenders, func(a, b *vmv1.VirtualMachine) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, c := range contenders {
		if carries(c, ipAddressName) {
			return c.Name
		}
	}
	return contenders[0].Name
}

// carries reports whether the VM's networks-spec annotation attaches the IPAddress.
func carries(vm *vmv1.VirtualMachine, ipAddressName string) bool {
	for _, e := range parseNetworksSpec(vm.Annotations[sdnv1.AnnotationNetworksSpec]) {
		if slices.Contains(e.IPAddressNames, ipAddressName) {
			return true
		}
	}
	return false
}

// parseNetworksSpec reads a networks-spec annotation; an absent or unreadable one is empty
// (it is rewritten from the decisions anyway).
func parseNetworksSpec(s string) []sdnv1.NetworksSpecEntry {
	if s == "" {
		return nil
	}
	var out []sdnv1.NetworksSpecEntry
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil
	}
	return out
}
