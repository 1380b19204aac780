package plan

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// holders finds the other VMs of the namespace that want the same static IPAddress on the same
// network, and which VM holds it (DESIGN.md §4.4). Who holds an address is decided by what
// runs, then by what only vmipam writes — never by what a user can write: a VM whose launcher
// pod carries the address (a terminating one too: its guest may still use it) outranks every
// other — one whose record attaches it too first, then the oldest pod —; next comes a VM whose
// decision record attaches it on that network, then the oldest VM, and only then the name.
// Ties never go to the newcomer. A VM that still carries the address counts even when its
// spec no longer names it. Every contender computes the same holder, so exactly one of them attaches the address
// and the current holder always keeps it. A VM whose record let go of the address holds it for
// ReleaseGrace more (handoff); wait is how long until then, 0 when nothing is held back.
func (r observer) holders(ctx context.Context, vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec) (h evaluator.Holders, wait time.Duration, err error) {
	carriers, err := r.carriers(ctx, vm.Namespace, spec)
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
			contenders = append(contenders, contender{vm: &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name}}, carrier: c})
		}
	}
	slices.Sort(others)
	h = evaluator.Holders{VMs: others, Holder: holder(contenders)}
	own := carriers[vm.Name]
	if own != nil && own.pod || h.Holder != vm.Name {
		return h, 0, nil // a running guest keeps its NIC; a ranking that chose another stands
	}
	h.Holder, wait, err = r.handoff(ctx, vm, spec.IPAddressName)
	return h, wait, err
}

// carrier is what shows that a VM uses an IPAddress.
type carrier struct {
	// record: the VM's decision record attaches it on the contended network.
	record bool
	// pod: a launcher pod of the VM that has not finished carries it; since is when the oldest
	// such pod was created.
	pod   bool
	since metav1.Time
}

// contender is a VM that wants or carries a static IPAddress.
type contender struct {
	vm      *vmv1.VirtualMachine // only the name is known of a VM that is a carrier alone
	carrier *carrier             // nil when nothing of the VM carries the address
}

// carriers returns, by VM name, what carries the IPAddress of spec: the VMs whose record
// attaches it on spec's network, and the VMs whose launcher pods (running or terminating, not
// finished) carry it. The indexes leave out every VM's own Auto IPAddress (index.OwnAuto), so a
// name that may be one — another VM's Auto IPAddress named as static, which that VM still
// carries after its owner reference was removed — is looked up in the namespace's records and
// pods one by one.
func (r observer) carriers(ctx context.Context, namespace string, spec vmv1.NetworksSpec) (map[string]*carrier, error) {
	out := map[string]*carrier{}
	get := func(name string) *carrier {
		if out[name] == nil {
			out[name] = &carrier{}
		}
		return out[name]
	}
	scan := naming.MayBeAutoIPAddress(spec.IPAddressName)
	var records v1alpha1.VirtualMachineIPAMList
	if err := r.reader.List(ctx, &records, lookup(namespace, index.RecordIPAddress, spec.IPAddressName, scan)...); err != nil {
		return nil, fmt.Errorf("list records attaching IPAddress %s: %w", spec.IPAddressName, err)
	}
	for i := range records.Items {
		if rec := &records.Items[i]; attaches(rec, spec) {
			get(rec.Name).record = true
		}
	}
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, lookup(namespace, index.CarriedIPAddress, spec.IPAddressName, scan)...); err != nil {
		return nil, fmt.Errorf("list pods carrying IPAddress %s: %w", spec.IPAddressName, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		name := p.Labels[vmv1.LabelLauncherVMName]
		if name == "" || !usesAddresses(p) || scan && !carries(p, spec.IPAddressName) {
			continue
		}
		c := get(name)
		if !c.pod || p.CreationTimestamp.Before(&c.since) {
			c.pod, c.since = true, p.CreationTimestamp
		}
	}
	return out, nil
}

// lookup is the list options of a carrier lookup: the objects of namespace that field indexes
// under value, or every object of namespace when scan (the caller filters them). A scan reads
// the cache's own objects, not a copy of each: carriers only reads them, and a name of Auto
// shape is common enough among static ones ("web-static", "db-public") that copying every
// record and pod of the namespace per reconcile would cost O(namespace) allocations.
func lookup(namespace, field, value string, scan bool) []client.ListOption {
	if scan {
		return []client.ListOption{client.InNamespace(namespace), client.UnsafeDisableDeepCopy}
	}
	return []client.ListOption{client.InNamespace(namespace), client.MatchingFields{field: value}}
}

// carries reports whether launcher pod p's networks-spec attaches IPAddress name. The
// annotation is parsed only when it contains the name at all, so a scan of a namespace's pods
// costs a substring search of each.
func carries(p *corev1.Pod, name string) bool {
	annotation := p.Annotations[sdnv1.AnnotationNetworksSpec]
	return strings.Contains(annotation, name) && slices.Contains(index.CarriedNames(annotation), name)
}

// attaches reports whether rec attaches spec's IPAddress on spec's network.
func attaches(rec *v1alpha1.VirtualMachineIPAM, spec vmv1.NetworksSpec) bool {
	return slices.ContainsFunc(rec.Spec.Interfaces, func(d v1alpha1.InterfaceDecision) bool {
		return d.Attach && d.IPAddressName == spec.IPAddressName && string(d.Type) == string(spec.Type) && d.Name == spec.Name
	})
}

// handoff returns who holds the static IPAddress name for vm, which the ranking chose and
// which no pod of vm carries: the VM whose record let go of it last, while that is younger than
// ReleaseGrace, with how long until then; else vm itself and 0. The reason is the one for
// ReleaseGrace: the releasing VM's next launcher pod may be made from a read of its record
// taken before the record let go, and would then carry the address beside vm's pod (two
// guests, one address). The wait is timed from the record's write, which is persisted, so a
// new leader honours it; it holds whoever asks — a VM that waited for the address, or one
// created a moment later.
func (r observer) handoff(ctx context.Context, vm *vmv1.VirtualMachine, name string) (string, time.Duration, error) {
	var records v1alpha1.VirtualMachineIPAMList
	if err := r.reader.List(ctx, &records, client.InNamespace(vm.Namespace),
		client.MatchingFields{index.RecordReleased: name}); err != nil {
		return "", 0, fmt.Errorf("list records releasing IPAddress %s: %w", name, err)
	}
	by, wait := vm.Name, time.Duration(0)
	for i := range records.Items {
		rec := &records.Items[i]
		if rec.Name == vm.Name {
			continue
		}
		for _, rel := range rec.Spec.Releases {
			left := rel.Since.Add(ReleaseGrace).Sub(r.now)
			if rel.Type != v1alpha1.ReleaseStatic || rel.IPAddressName != name || left <= 0 {
				continue
			}
			if left > wait || left == wait && rec.Name < by {
				by, wait = rec.Name, left
			}
		}
	}
	return by, wait, nil
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
func holder(contenders []contender) string {
	slices.SortFunc(contenders, func(a, b contender) int {
		return cmp.Or(
			-cmp.Compare(rankPod(a), rankPod(b)),
			-cmp.Compare(rankDecided(a), rankDecided(b)),
			compareSince(a, b),
			-cmp.Compare(rank(a.carrier != nil && a.carrier.record), rank(b.carrier != nil && b.carrier.record)),
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

// rankDecided: among pod carriers, the one whose record attaches the address too comes
// first. since is when a pod was created, not when it began to carry the address: an older pod
// that has the address hot-plugged (a record forged past the admission policy, which vmipam
// rewrites at once) would otherwise outrank the pod that has carried it all along, and take it
// from its guest.
func rankDecided(c contender) int { return rank(c.carrier != nil && c.carrier.pod && c.carrier.record) }

// compareSince orders two pod carriers by how long their pods have carried the address.
func compareSince(a, b contender) int {
	if rankPod(a) == 0 || rankPod(b) == 0 {
		return 0
	}
	return a.carrier.since.Compare(b.carrier.since.Time)
}

// parseNetworksSpec reads a networks-spec annotation; an absent or unreadable one is empty.
func parseNetworksSpec(s string) []sdnv1.NetworksSpecEntry {
	out, _ := sdnv1.ParseNetworksSpec(s)
	return out
}
