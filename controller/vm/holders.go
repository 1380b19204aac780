package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// holders finds the other VMs of the namespace that want the same static IPAddress on the same
// network, and which VM holds it (DESIGN.md §4.4): one whose networks-spec or running launcher
// pod already carries it (the oldest, should several), else the oldest contender (creation
// time, then name). A VM that still carries the address counts even when its spec no longer
// names it — a change held back until restart, or a transient problem, leaves the address on
// the running guest. Every contender computes the same holder, so exactly one of them attaches
// the address and the current holder always keeps it.
func (r observer) holders(ctx context.Context, vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec) (evaluator.Holders, error) {
	carriers, err := r.carriers(ctx, vm.Namespace, spec.IPAddressName)
	if err != nil {
		return evaluator.Holders{}, err
	}
	var list vmv1.VirtualMachineList
	if err := r.reader.List(ctx, &list, client.InNamespace(vm.Namespace),
		client.MatchingFields{index.VMIPAddressName: spec.IPAddressName}); err != nil {
		return evaluator.Holders{}, fmt.Errorf("list VMs naming IPAddress %s: %w", spec.IPAddressName, err)
	}
	contenders := []*vmv1.VirtualMachine{vm}
	others := []string{}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == vm.UID || other.DeletionTimestamp != nil || !namesOnNetwork(other, spec) && !carriers[other.Name] {
			continue
		}
		contenders = append(contenders, other)
		others = append(others, other.Name)
	}
	for name := range carriers {
		if name != vm.Name && !slices.Contains(others, name) {
			others = append(others, name)
			contenders = append(contenders, &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	}
	slices.Sort(others)
	return evaluator.Holders{VMs: others, Holder: holder(contenders, carriers)}, nil
}

// carriers returns the names of the namespace's VMs whose networks-spec, or whose running
// launcher pods' networks-spec, attaches the IPAddress.
func (r observer) carriers(ctx context.Context, namespace, ipAddressName string) (map[string]bool, error) {
	out := map[string]bool{}
	var vms vmv1.VirtualMachineList
	if err := r.reader.List(ctx, &vms, client.InNamespace(namespace),
		client.MatchingFields{index.CarriedIPAddress: ipAddressName}); err != nil {
		return nil, fmt.Errorf("list VMs carrying IPAddress %s: %w", ipAddressName, err)
	}
	for _, v := range vms.Items {
		if v.DeletionTimestamp == nil {
			out[v.Name] = true
		}
	}
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingFields{index.CarriedIPAddress: ipAddressName}); err != nil {
		return nil, fmt.Errorf("list pods carrying IPAddress %s: %w", ipAddressName, err)
	}
	for _, p := range pods.Items {
		if name := p.Labels[vmv1.LabelLauncherVMName]; name != "" && active(&p) {
			out[name] = true
		}
	}
	return out, nil
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

// holder picks the oldest contender that carries the IPAddress, else the oldest contender. A
// carrier known only through its pods (its VM object is not at hand) sorts first: it holds.
func holder(contenders []*vmv1.VirtualMachine, carrying map[string]bool) string {
	slices.SortFunc(contenders, func(a, b *vmv1.VirtualMachine) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for _, c := range contenders {
		if carrying[c.Name] {
			return c.Name
		}
	}
	return contenders[0].Name
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
