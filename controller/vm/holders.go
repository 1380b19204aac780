package vm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// holders finds the other VMs of the namespace that want the same static IPAddress on the same
// network, and which VM holds it (DESIGN.md §4.4). Who holds an address is decided by what
// runs, not by what anyone can write: a VM whose launcher pod carries the address (a
// terminating one too: its guest may still use it) outranks every VM known only from its own
// networks-spec annotation — which a user can write, or copy along with a manifest —, and
// among those the pod that has carried it longest wins. Ties never go to the newcomer: next
// comes the VM whose status (written by vmipam, dropped from a copied manifest) shows the
// address on that network, then a VM whose annotation carries it, then the oldest VM, and only
// then the name. A VM that still carries the address counts even when its spec no longer names
// it. Every contender computes the same holder, so exactly one of them attaches the address
// and the current holder always keeps it. A VM whose networks-spec let go of the address holds
// it for ReleaseGrace more (handoffs); wait is how long until then, 0 when nothing is held
// back.
func (r observer) holders(ctx context.Context, vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec, address string) (h evaluator.Holders, wait time.Duration, err error) {
	carriers, err := r.carriers(ctx, vm.Namespace, spec.IPAddressName)
	if err != nil {
		return evaluator.Holders{}, 0, err
	}
	var list vmv1.VirtualMachineList
	if err := r.reader.List(ctx, &list, client.InNamespace(vm.Namespace),
		client.MatchingFields{index.VMIPAddressName: spec.IPAddressName}); err != nil {
		return evaluator.Holders{}, 0, fmt.Errorf("list VMs naming IPAddress %s: %w", spec.IPAddressName, err)
	}
	contenders := []contender{{vm: vm, carrier: carriers[vm.Name]}}
	others := []string{}
	for i := range list.Items {
		other := &list.Items[i]
		if other.UID == vm.UID || other.DeletionTimestamp != nil || !namesOnNetwork(other, spec) && carriers[other.Name] == nil {
			continue
		}
		contenders = append(contenders, contender{vm: other, carrier: carriers[other.Name]})
		others = append(others, other.Name)
	}
	for name, c := range carriers {
		if name != vm.Name && !slices.Contains(others, name) {
			others = append(others, name)
			contenders = append(contenders, contender{vm: c.vmOrName(name), carrier: c})
		}
	}
	slices.Sort(others)
	h = evaluator.Holders{VMs: others, Holder: holder(contenders, spec, address)}
	if r.handoffs != nil {
		ip := types.NamespacedName{Namespace: vm.Namespace, Name: spec.IPAddressName}
		own := carriers[vm.Name]
		h.Holder, wait = r.handoffs.hold(ip, vm.Name, h.Holder, own != nil && own.pod, r.now, ReleaseGrace)
	}
	return h, wait, nil
}

// carrier is what shows that a VM uses an IPAddress.
type carrier struct {
	// vm is the VM whose networks-spec carries it, nil when only its pods do.
	vm *vmv1.VirtualMachine
	// annotation: the VM's own networks-spec carries it.
	annotation bool
	// pod: a launcher pod of the VM that has not finished carries it; since is when the oldest
	// such pod was created.
	pod   bool
	since metav1.Time
}

// vmOrName is the carrier's VM, or a VM known by name only.
func (c *carrier) vmOrName(name string) *vmv1.VirtualMachine {
	if c.vm != nil {
		return c.vm
	}
	return &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// contender is a VM that wants or carries a static IPAddress.
type contender struct {
	vm      *vmv1.VirtualMachine
	carrier *carrier // nil when nothing of the VM carries the address
}

// carriers returns, by VM name, what carries the IPAddress: the namespace's VMs whose own
// networks-spec attaches it, and the VMs whose launcher pods (running or terminating, not
// finished) do.
func (r observer) carriers(ctx context.Context, namespace, ipAddressName string) (map[string]*carrier, error) {
	out := map[string]*carrier{}
	get := func(name string) *carrier {
		if out[name] == nil {
			out[name] = &carrier{}
		}
		return out[name]
	}
	var vms vmv1.VirtualMachineList
	if err := r.reader.List(ctx, &vms, client.InNamespace(namespace),
		client.MatchingFields{index.CarriedIPAddress: ipAddressName}); err != nil {
		return nil, fmt.Errorf("list VMs carrying IPAddress %s: %w", ipAddressName, err)
	}
	for i := range vms.Items {
		if v := &vms.Items[i]; v.DeletionTimestamp == nil {
			c := get(v.Name)
			c.vm, c.annotation = v, true
		}
	}
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingFields{index.CarriedIPAddress: ipAddressName}); err != nil {
		return nil, fmt.Errorf("list pods carrying IPAddress %s: %w", ipAddressName, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := p.Labels[vmv1.LabelLauncherVMName]
		if name == "" || !usesAddresses(p) {
			continue
		}
		c := get(name)
		if !c.pod || p.CreationTimestamp.Before(&c.since) {
			c.pod, c.since = true, p.CreationTimestamp
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

// holder ranks the contenders (see holders) and returns the first one's name.
func holder(contenders []contender, spec vmv1.NetworksSpec, address string) string {
	slices.SortFunc(contenders, func(a, b contender) int {
		return cmp.Or(
			-cmp.Compare(rankPod(a), rankPod(b)),
			compareSince(a, b),
			-cmp.Compare(rank(showsAddress(a.vm, spec, address)), rank(showsAddress(b.vm, spec, address))),
			-cmp.Compare(rank(a.carrier != nil && a.carrier.annotation), rank(b.carrier != nil && b.carrier.annotation)),
			a.vm.CreationTimestamp.Compare(b.vm.CreationTimestamp.Time),
			strings.Compare(a.vm.Name, b.vm.Name))
	})
	return contenders[0].vm.Name
}

func rank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func rankPod(c contender) int { return rank(c.carrier != nil && c.carrier.pod) }

// compareSince orders two pod carriers by how long their pods have carried the address.
func compareSince(a, b contender) int {
	if rankPod(a) == 0 || rankPod(b) == 0 {
		return 0
	}
	return a.carrier.since.Compare(b.carrier.since.Time)
}

// showsAddress reports whether vm's status shows address on spec's network: vmipam's own record
// that the VM has it attached (status is not part of a manifest a user copies or creates).
func showsAddress(vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec, address string) bool {
	if address == "" {
		return false
	}
	for _, n := range vm.Status.Networks {
		if n.Type == spec.Type && n.Name == spec.Name && n.IPAddress == address {
			return true
		}
	}
	return false
}

// parseNetworksSpec reads a networks-spec annotation; an absent or unreadable one is empty
// (it is rewritten from the decisions anyway).
func parseNetworksSpec(s string) []sdnv1.NetworksSpecEntry {
	out, _ := sdnv1.ParseNetworksSpec(s)
	return out
}
