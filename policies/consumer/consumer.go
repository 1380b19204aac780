package consumer

import (
	"crypto/md5" //nolint:gosec // the virtualization controller's ifName scheme, not a security use
	"encoding/hex"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// AnnotationDecided marks a next-boot template, and the launcher pods made from it (KubeVirt
// copies a template's annotations onto a pod it creates), as configured from a decision
// record. A pod with neither it nor a networks-spec started before anything decided its
// interfaces, and its first record is its initial configuration (Apply, Decided).
const AnnotationDecided = "ipam.virtualization.deckhouse.io/decided"

// Decided reports whether a launcher pod with these annotations was configured by a decision:
// it carries AnnotationDecided, or a networks-spec (which an earlier decision — a record, or
// before the platform adopted records its own IPAM — wrote). A pod with neither started
// before anything decided its additional interfaces.
func Decided(annotations map[string]string) bool {
	_, decided := annotations[AnnotationDecided]
	_, configured := annotations[sdnv1.AnnotationNetworksSpec]
	return decided || configured
}

// NICUserID is the uid and gid the virtualization controller puts on every networks-spec entry
// (virtualization-controller facts §4).
const NICUserID int64 = 64535

// Network is one additional spec.networks entry (type Network or ClusterNetwork) as the
// consumer knows it.
type Network struct {
	// Type is Network or ClusterNetwork; Name the network's name.
	Type, Name string
	// MAC is the NIC's status.networks[].macAddress; "" while none is assigned.
	MAC string
}

// Input is what the consumer knows of one VM.
type Input struct {
	// UID and Generation are the VM's metadata.uid and metadata.generation.
	UID        types.UID
	Generation int64
	// Networks are the VM's additional spec.networks entries, in spec order.
	Networks []Network
	// Record is the VM's VirtualMachineIPAM, nil when there is none.
	Record *v1alpha1.VirtualMachineIPAM
	// Running says the VM has active launcher pods; Applied is the networks-spec the oldest of
	// them carries and Decided whether it was configured by a decision (Decided of its
	// annotations).
	Running bool
	Applied []sdnv1.NetworksSpecEntry
	Decided bool
	// NextBoot is the current next-boot list (the KVVM template's networks-spec), kept as it
	// is while no record decides.
	NextBoot []sdnv1.NetworksSpecEntry
}

// Result is what the consumer applies.
type Result struct {
	// RecordGeneration is the generation of the record applied, 0 when no record decides.
	RecordGeneration int64
	// NextBoot is the networks-spec for the next launcher pod (a start).
	NextBoot []sdnv1.NetworksSpecEntry
	// Live is the networks-spec for every running launcher pod, and for the template a
	// migration target is made from; nil when the VM does not run.
	Live []sdnv1.NetworksSpecEntry
	// Decided says whether the running pods (and the template) are to carry AnnotationDecided.
	Decided bool
	// Held are the labels ("<Type>/<name>", Label) of the interfaces whose change waits for
	// the next start.
	Held []string
	// Items are the IPAM items of NetworkReady, in record order.
	Items []Item
	// Addresses are, by network ("<Type>/<name>"), the addresses the interfaces NextBoot
	// attaches carry (the record's address): what a consumer shows in status.networks while
	// the VM does not run. Nil when no record decides.
	Addresses map[string]string
}

// Apply computes what the consumer applies for in (see the package documentation).
func Apply(in Input) Result {
	rec := in.Record
	if rec == nil || rec.Spec.VMUID != in.UID || rec.Spec.VMGeneration < in.Generation {
		return undecided(in)
	}
	a := applier{in: in, macs: macs(in.Networks), applied: byKey(in.Applied), seen: map[string]bool{}, addresses: map[string]string{}}
	for i := range rec.Spec.Interfaces {
		a.interfaceDecision(&rec.Spec.Interfaces[i])
	}
	res := Result{RecordGeneration: rec.Generation, NextBoot: a.nextBoot, Decided: true, Held: a.held, Items: a.items,
		Addresses: a.addresses}
	if in.Running {
		res.Live = nonNil(a.live)
	}
	return res
}

// undecided is the Result while no record decides: nothing applied changes, every interface
// is pending.
func undecided(in Input) Result {
	res := Result{NextBoot: in.NextBoot, Decided: in.Decided}
	if in.Running {
		res.Live = nonNil(in.Applied)
	}
	msg := "waiting for the IPAM decision (VirtualMachineIPAM) of this VM"
	if rec := in.Record; rec != nil && rec.Spec.VMUID == in.UID {
		msg = fmt.Sprintf("waiting for the IPAM decision of VM generation %d (the record decides generation %d)",
			in.Generation, rec.Spec.VMGeneration)
	}
	seen := map[string]bool{}
	for _, n := range in.Networks {
		if key := n.Type + "/" + n.Name; !seen[key] {
			seen[key] = true
			res.Items = append(res.Items, Item{Label: Label(n.Type, n.Name), Reason: ReasonDecisionPending, Message: msg})
		}
	}
	return res
}

// applier accumulates Apply's result interface by interface.
type applier struct {
	in        Input
	macs      map[string]string
	applied   map[string]sdnv1.NetworksSpecEntry
	seen      map[string]bool
	nextBoot  []sdnv1.NetworksSpecEntry
	live      []sdnv1.NetworksSpecEntry
	held      []string
	items     []Item
	addresses map[string]string
}

// interfaceDecision applies one decision of the record. Only the first decision for a network
// counts (a repeated spec entry is reported, never provisioned).
func (a *applier) interfaceDecision(d *v1alpha1.InterfaceDecision) {
	key := string(d.Type) + "/" + d.Name
	label := Label(string(d.Type), d.Name)
	if !d.Removed && d.Reason != "" {
		a.items = append(a.items, Item{Label: label, Reason: d.Reason, Message: d.Message})
	}
	if a.seen[key] {
		return
	}
	a.seen[key] = true
	var want *sdnv1.NetworksSpecEntry
	if d.Attach && !d.Removed {
		e := Entry(d, a.macs[key])
		want = &e
		a.nextBoot = append(a.nextBoot, e)
		if d.Address != "" {
			a.addresses[key] = d.Address
		}
	}
	if !a.in.Running {
		return
	}
	has, had := a.applied[key]
	switch {
	case sameIPAM(want, has, had):
		if had {
			a.live = append(a.live, has)
		}
	case d.Hotplug || !a.in.Decided:
		if want != nil {
			a.live = append(a.live, *want)
		}
	default: // held until the next start: what runs stays
		a.held = append(a.held, label)
		if had {
			a.live = append(a.live, has)
		} else if want != nil && d.Reason == "" {
			a.items = append(a.items, Item{Label: label, Reason: ReasonAwaitingRestart,
				Message: "the running VM does not have this interface: it is attached at the next restart (hotplug not allowed)"})
		}
	}
}

// Entry is the networks-spec entry of an attached interface, as the virtualization controller
// writes it (virtualization-controller facts §4): id, type, name, ifName from the NIC's MAC,
// uid and gid NICUserID, and for an interface with an address ipAssignmentMode DHCP and the
// IPAddress's name.
func Entry(d *v1alpha1.InterfaceDecision, mac string) sdnv1.NetworksSpecEntry {
	e := sdnv1.NetworksSpecEntry{Type: string(d.Type), Name: d.Name, IfName: IfName(string(d.Type), mac),
		UID: NICUserID, GID: NICUserID}
	if d.ID != nil {
		e.ID = *d.ID
	}
	if d.Allocation != v1alpha1.AllocationNone && d.IPAddressName != "" {
		e.IPAssignmentMode, e.IPAddressNames = sdnv1.IPAssignmentModeDHCP, []string{d.IPAddressName}
	}
	return e
}

// IfName is the Linux name of an additional NIC in the launcher pod, as the virtualization
// controller derives it: "veth_n" (Network) or "veth_cn" (ClusterNetwork) followed by the first
// 8 hex characters of the MD5 of the NIC's MAC address (virtualization-controller facts §4).
func IfName(networkType, mac string) string {
	sum := md5.Sum([]byte(mac)) //nolint:gosec // a name, not a secret
	prefix := "veth_n"
	if networkType == "ClusterNetwork" {
		prefix = "veth_cn"
	}
	return prefix + hex.EncodeToString(sum[:])[:8]
}

// sameIPAM reports whether a wanted entry (nil: not attached) and the applied one (had: there
// is one) attach the interface alike: both absent, or both present with the same assignment
// mode and IPAddresses. The NIC's other fields (id, ifName) are not the IPAM decision's, and a
// difference in them is no change to apply to a running guest.
func sameIPAM(want *sdnv1.NetworksSpecEntry, has sdnv1.NetworksSpecEntry, had bool) bool {
	if want == nil || !had {
		return want == nil && !had
	}
	if want.IPAssignmentMode != has.IPAssignmentMode || len(want.IPAddressNames) != len(has.IPAddressNames) {
		return false
	}
	for i := range want.IPAddressNames {
		if want.IPAddressNames[i] != has.IPAddressNames[i] {
			return false
		}
	}
	return true
}

// byKey indexes entries by "<Type>/<name>"; the first entry of a key wins.
func byKey(entries []sdnv1.NetworksSpecEntry) map[string]sdnv1.NetworksSpecEntry {
	out := make(map[string]sdnv1.NetworksSpecEntry, len(entries))
	for _, e := range entries {
		key := e.Type + "/" + e.Name
		if _, dup := out[key]; !dup {
			out[key] = e
		}
	}
	return out
}

// macs maps each network's key to the MAC of its first spec entry.
func macs(networks []Network) map[string]string {
	out := make(map[string]string, len(networks))
	for _, n := range networks {
		key := n.Type + "/" + n.Name
		if _, dup := out[key]; !dup {
			out[key] = n.MAC
		}
	}
	return out
}

// nonNil returns entries, or an empty list when it is nil: a running VM's list is never nil.
func nonNil(entries []sdnv1.NetworksSpecEntry) []sdnv1.NetworksSpecEntry {
	if entries == nil {
		return []sdnv1.NetworksSpecEntry{}
	}
	return entries
}
