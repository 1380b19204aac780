package vm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// Plan is everything one reconcile of a VM decides and would write. The reconciler executes
// it; the dry-run endpoint returns it. Computing a Plan writes nothing.
type Plan struct {
	// Interfaces has one entry per additional interface, in spec order, then one per
	// interface removed from the spec that the applied networks-spec still carries.
	Interfaces []InterfaceResult `json:"interfaces"`
	// CreateIPAddresses are the Auto IPAddresses to create.
	CreateIPAddresses []*sdnv1.IPAddress `json:"createIPAddresses,omitempty"`
	// DeleteIPAddresses are the names of this VM's Auto IPAddresses no interface wants.
	DeleteIPAddresses []string `json:"deleteIPAddresses,omitempty"`
	// VMNetworksSpec is the networks-spec for the VM (the next launcher pod).
	VMNetworksSpec NetworksSpecWrite `json:"vmNetworksSpec"`
	// Pods are the networks-spec writes for the running launcher pods.
	Pods []PodWrite `json:"pods,omitempty"`
	// PendingRestart lists interfaces ("<Type>/<name>") whose change the running pods do not
	// get because the decision forbids hotplug.
	PendingRestart []string `json:"pendingRestart,omitempty"`
	// Status is the VM status after the reconcile; StatusChanged says whether it differs.
	Status        vmv1.VirtualMachineStatus `json:"status"`
	StatusChanged bool                      `json:"statusChanged"`
	// Deferred: the only problems are IPAddresses SDN is about to answer — Auto IPAddresses
	// created less than FreshPendingGrace ago that SDN has not allocated yet, and static
	// IPAddresses created less than FreshPendingGrace ago that SDN has not answered at all.
	// SDN usually answers within milliseconds and the reconcile its answer triggers writes the
	// final state, so networks-spec and status are written once per VM instead of once per
	// allocation (and a hotplug's reconcile is not queued behind a status write per new
	// IPAddress); past the grace, the intermediate state is written as it is.
	Deferred bool `json:"deferred,omitempty"`
	// RetryAfter is when to look again if nothing else triggers a reconcile (with Deferred).
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
}

// FreshPendingGrace is how long a VM's networks-spec and status may wait for SDN to allocate
// its newly created Auto IPAddresses. UnansweredGrace applies instead while SDN has not
// written any status on the IPAddress yet (its queue is long, e.g. when a thousand VMs start
// at once): waiting for its first answer costs nothing, and a VM still shows IPAddressPending
// if SDN stays silent longer.
const (
	FreshPendingGrace = 5 * time.Second
	UnansweredGrace   = 30 * time.Second
)

// unanswered: SDN has not written any status on the IPAddress yet.
func unanswered(ip *sdnv1.IPAddress) bool {
	return ip.Status.Phase == "" && len(ip.Status.Conditions) == 0 && ip.Status.Address == ""
}

// InterfaceResult is the outcome for one additional interface.
type InterfaceResult struct {
	// Index is the position in spec.networks; -1 for a removed interface.
	Index int `json:"index"`
	// Removed: the spec no longer names the interface; Attached says whether a running pod
	// keeps it until the restart because its decision forbids hotplug.
	Removed bool   `json:"removed,omitempty"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	// IPAddressName is the IPAddress the interface uses: the static one or its Auto one.
	IPAddressName string `json:"ipAddressName,omitempty"`
	// Address is the allocated address shown in status.networks, when attached.
	Address  string             `json:"address,omitempty"`
	Attached bool               `json:"attached"`
	Decision evaluator.Decision `json:"decision"`
	// Reason and Message say why the interface is not attached (from the decision, or from
	// the controller: DuplicateInterface, IPAddressConflict).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// NetworksSpecWrite is the networks-spec annotation an object should carry.
type NetworksSpecWrite struct {
	Entries []sdnv1.NetworksSpecEntry `json:"entries"`
	// Changed is true when the object's annotation differs and would be patched.
	Changed bool   `json:"changed"`
	value   string `json:"-"` // the annotation's value; tagged so that schema generators skip it
}

// PodWrite is the networks-spec write for one running launcher pod.
type PodWrite struct {
	Name              string `json:"name"`
	NetworksSpecWrite `json:",inline"`
}

// Evaluate computes the Plan for vm as the controller would, reading the VM's world from
// reader (a cache, or a cache with overlaid objects) and deciding with set. It writes
// nothing. vm need not exist in the cluster. It is the dry run's: interfaces left undecided
// when the VM's evaluation budget runs out say that nothing retries them.
func Evaluate(ctx context.Context, reader client.Reader, set *evaluator.Set, vm *vmv1.VirtualMachine, opts evaluator.Options) (*Plan, error) {
	s, err := observer{reader: reader, now: time.Now()}.observe(ctx, vm, set)
	if err != nil {
		return nil, err
	}
	if err := decide(ctx, s, opts, errDryRunBudget); err != nil {
		return nil, err
	}
	asTheControllerWrites(s)
	return plan(s), nil
}

// asTheControllerWrites rewrites the dry run's budget notice in the NetworkReady items (the
// problems) to the text the controller writes, since the Plan's status is what the controller
// would write; the decisions keep the dry run's own notice (nothing retries a dry run).
// Before, `ipamctl evaluate` showed "the dry run does not retry" under "Status (would be
// written)", a text the controller never writes.
func asTheControllerWrites(s *scope) {
	for _, its := range [][]*iface{s.interfaces, s.removed} {
		for _, it := range its {
			if it.problem != nil {
				it.problem.message = strings.ReplaceAll(it.problem.message, errDryRunBudget.Error(), errVMBudget.Error())
			}
		}
	}
}

// plan turns the decisions into writes. Pure: a function of the scope only, which it does not
// change (it works on a copy).
func plan(observed *scope) *Plan {
	s := observed.clone()
	p := &Plan{}
	// The namespace controller deletes a terminating namespace's IPAddresses before its VMs;
	// creating them again would only be refused.
	creating := s.namespace == nil || s.namespace.DeletionTimestamp == nil
	for _, it := range s.interfaces {
		if it.dupOf < 0 && it.decision.Allocation == evaluator.AllocationAuto {
			switch {
			case it.auto != nil:
				checkOwner(s, it)
			case creating:
				p.CreateIPAddresses = append(p.CreateIPAddresses, autoIPAddress(s.vm, it))
			}
		}
	}
	vmEntries, _ := entriesFor(s, s.vm, false)
	p.VMNetworksSpec = networksSpecWrite(s.vm, vmEntries)
	running := vmEntries // what runs after this reconcile: the oldest pod's, else the VM's
	for i := range s.pods {
		entries, pending := entriesFor(s, &s.pods[i], true)
		s.pending = mergePending(s.pending, pending)
		if i == 0 {
			running = entries
		}
		p.Pods = append(p.Pods, PodWrite{Name: s.pods[i].Name, NetworksSpecWrite: networksSpecWrite(&s.pods[i], entries)})
	}
	attach(s, running)
	p.PendingRestart = s.pending
	p.Status = desiredStatus(s)
	p.StatusChanged = !equality.Semantic.DeepEqual(p.Status, s.vm.Status)
	p.RetryAfter, p.Deferred = freshPending(s, p)
	if !p.Deferred { // a deferred plan writes no networks-spec, so it must not delete either
		p.DeleteIPAddresses = unwanted(s, vmEntries, p.Pods)
	}
	p.Interfaces = results(s)
	return p
}

// clone copies the scope and its interfaces, so that planning can record what it decides per
// interface without changing what was observed. Objects are shared: planning never writes them.
func (s *scope) clone() *scope {
	c := *s
	c.interfaces, c.removed = cloneIfaces(s.interfaces), cloneIfaces(s.removed)
	c.pending = slices.Clone(s.pending)
	return &c
}

// cloneIfaces copies each interface of list.
func cloneIfaces(list []*iface) []*iface {
	out := make([]*iface, len(list))
	for i, it := range list {
		copied := *it
		out[i] = &copied
	}
	return out
}

// ReasonAwaitingRestart is the NetworkReady reason of an interface the VM is to have but its
// running launcher pod lacks, because the policy does not allow hot-plugging the change: it is
// attached at the next restart.
const ReasonAwaitingRestart = "AwaitingRestart"

// attach records, per interface, the entry it has on what runs after this reconcile (running:
// the oldest pod's entries, else the VM's), and makes an interface that should be attached but
// is not there a NetworkReady problem: NetworkReady never says attached while the guest lacks
// the NIC.
func attach(s *scope, running []sdnv1.NetworksSpecEntry) {
	byKey := map[string]*sdnv1.NetworksSpecEntry{}
	for i := range running {
		byKey[index.NetworkKey(running[i].Type, running[i].Name)] = &running[i]
	}
	for _, it := range s.removed { // a running pod keeps it when its removal waits for a restart
		it.attached = byKey[it.key]
	}
	for _, it := range s.interfaces {
		if it.dupOf >= 0 {
			continue
		}
		it.attached = byKey[it.key]
		if it.attached == nil && it.problem == nil && attachedEntry(it) != nil {
			it.problem = &problem{ReasonAwaitingRestart,
				"the running VM does not have this interface: it is attached at the next restart (hotplug not allowed)"}
		}
	}
}

// freshPending reports whether every problem is an IPAddress SDN is about to answer, within
// its grace before s.now (graceLeft), and how long until the last such IPAddress is out of
// grace.
func freshPending(s *scope, p *Plan) (time.Duration, bool) {
	if len(p.PendingRestart) > 0 {
		return 0, false
	}
	created := map[string]bool{}
	for _, ip := range p.CreateIPAddresses {
		created[ip.Name] = true
	}
	wait, any := time.Duration(0), false
	for _, it := range s.interfaces {
		if it.problem == nil {
			continue
		}
		left := graceLeft(s, it, created)
		if left <= 0 {
			return 0, false
		}
		wait, any = max(wait, left), true
	}
	return wait, any
}

// graceLeft is how long the interface's problem may still wait for SDN's answer, ≤ 0 when it
// must be reported now:
//   - IPAddressPending of its Auto IPAddress: FreshPendingGrace from the IPAddress's creation
//     (by this plan, created), or UnansweredGrace while SDN has not written any status on it;
//   - IPAddressNotAllocated of a static IPAddress SDN has not answered at all (a user has just
//     created it, e.g. to hot-plug the interface): FreshPendingGrace from its creation. Once
//     SDN answered (Pending with a reason, or refused) the answer is reported as it is.
func graceLeft(s *scope, it *iface, created map[string]bool) time.Duration {
	switch it.problem.reason {
	case string(evaluator.ReasonIPAddressPending):
		if created[it.autoName] {
			return FreshPendingGrace
		}
		if it.auto == nil {
			return 0
		}
		grace := FreshPendingGrace
		if unanswered(it.auto) {
			grace = UnansweredGrace
		}
		return grace - s.now.Sub(it.auto.CreationTimestamp.Time)
	case string(evaluator.ReasonIPAddressNotAllocated):
		if it.static == nil || !unanswered(it.static) {
			return 0
		}
		return FreshPendingGrace - s.now.Sub(it.static.CreationTimestamp.Time)
	}
	return 0
}

func results(s *scope) []InterfaceResult {
	out := make([]InterfaceResult, 0, len(s.interfaces))
	for _, it := range s.interfaces {
		r := InterfaceResult{Index: it.index, Type: string(it.spec.Type), Name: it.spec.Name,
			Decision: it.decision, Attached: it.attached != nil, Address: address(s, it)}
		switch {
		case it.spec.IPAddressName != "":
			r.IPAddressName = it.spec.IPAddressName
		case it.decision.Allocation == evaluator.AllocationAuto:
			r.IPAddressName = it.autoName
		}
		if it.problem != nil {
			r.Reason, r.Message = it.problem.reason, it.problem.message
		}
		out = append(out, r)
	}
	for _, it := range s.removed {
		r := InterfaceResult{Index: -1, Type: string(it.spec.Type), Name: it.spec.Name, Removed: true,
			IPAddressName: it.spec.IPAddressName, Attached: it.attached != nil, Decision: it.decision}
		if it.decision.Allocation == evaluator.AllocationAuto {
			r.IPAddressName = it.autoName
		}
		out = append(out, r)
	}
	return out
}

func autoIPAddress(vm *vmv1.VirtualMachine, it *iface) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{
		TypeMeta: metav1.TypeMeta{APIVersion: sdnv1.GroupVersion.String(), Kind: "IPAddress"},
		ObjectMeta: metav1.ObjectMeta{
			Name: it.autoName, Namespace: vm.Namespace,
			Labels:          map[string]string{LabelVMUID: string(vm.UID)},
			Annotations:     map[string]string{AnnotationInterface: it.key},
			OwnerReferences: []metav1.OwnerReference{vmOwnerRef(vm)},
		},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto,
			NetworkRef: sdnv1.IPAddressNetworkRef{Kind: string(it.spec.Type), Name: it.spec.Name}},
	}
}

func vmOwnerRef(vm *vmv1.VirtualMachine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
		Name: vm.Name, UID: vm.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// checkOwner reports an object holding the Auto name that this VM does not control.
func checkOwner(s *scope, it *iface) {
	if ref := index.ControllerVM(it.auto); ref != nil && ref.UID == s.vm.UID {
		return
	}
	owner := "no VirtualMachine"
	if ref := index.ControllerVM(it.auto); ref != nil {
		// An ownerReference's name is not validated by the API: quote it like any other name.
		owner = fmt.Sprintf("VirtualMachine %s (uid %s)", evaluator.QuoteName(ref.Name), evaluator.QuoteName(string(ref.UID)))
	}
	it.problem = &problem{ReasonIPAddressConflict, fmt.Sprintf(
		"IPAddress %s already exists and is controlled by %s, and vmipam does not adopt it", it.autoName, owner)}
}

// unwanted lists this VM's Auto IPAddresses that nothing wants any more. Wanted are: the Auto
// IPAddress of every interface decided Auto, of every interface whose decision failed, and of
// every interface whose network is missing (it may come back; the spec still names it); every
// IPAddress a spec entry names; every IPAddress the VM or a running pod carries after this
// plan's networks-spec writes (a change held back until restart keeps its old address); and
// every IPAddress a terminating launcher pod carries (vmipam does not write those; the guest
// may still be shutting down on them). Only objects of type Auto, controlled by this VM's UID
// and carrying vmipam's interface annotation — that vmipam created — are candidates, whatever
// their labels say. The reconciler deletes only after the writes succeeded, and checks the
// candidates once more against the live VM and pods first (see execute); a deferred plan,
// which writes nothing, deletes nothing.
func unwanted(s *scope, vmEntries []sdnv1.NetworksSpecEntry, pods []PodWrite) []string {
	wanted := map[string]bool{}
	for _, it := range s.interfaces {
		switch {
		case it.decision.Allocation == evaluator.AllocationAuto, it.decision.Allocation == evaluator.AllocationUnknown,
			it.spec.IPAddressName == "" && !it.network.exists:
			wanted[it.autoName] = true
		}
		wanted[it.spec.IPAddressName] = true
	}
	carried := [][]sdnv1.NetworksSpecEntry{vmEntries}
	for _, p := range pods {
		carried = append(carried, p.Entries)
	}
	for i := range s.terminating {
		carried = append(carried, parseNetworksSpec(s.terminating[i].Annotations[sdnv1.AnnotationNetworksSpec]))
	}
	for _, entries := range carried {
		for _, e := range entries {
			for _, name := range e.IPAddressNames {
				wanted[name] = true
			}
		}
	}
	var out []string
	for i := range s.owned {
		if ip := &s.owned[i]; !wanted[ip.Name] && ours(ip, s.vm) && ip.DeletionTimestamp == nil {
			out = append(out, ip.Name)
		}
	}
	return out
}

// ours reports whether ip is an Auto IPAddress vmipam created for vm: of type Auto, controlled
// by vm's UID, with vmipam's interface annotation. Only such an IPAddress is ever deleted.
func ours(ip *sdnv1.IPAddress, vm *vmv1.VirtualMachine) bool {
	ref := index.ControllerVM(ip)
	_, annotated := ip.Annotations[AnnotationInterface]
	return ref != nil && ref.UID == vm.UID && ip.Spec.Type == sdnv1.IPAddressTypeAuto && annotated
}

// attachedEntry is the networks-spec entry of an interface that is attached, or nil.
func attachedEntry(it *iface) *sdnv1.NetworksSpecEntry {
	if it.problem != nil || it.decision.Skip || it.dupOf >= 0 {
		return nil
	}
	e := &sdnv1.NetworksSpecEntry{ID: deref(it.spec.ID), Type: string(it.spec.Type), Name: it.spec.Name,
		IfName: naming.IfName(string(it.spec.Type), it.spec.Name)}
	switch it.decision.Allocation {
	case evaluator.AllocationAuto:
		e.IPAssignmentMode, e.IPAddressNames = sdnv1.IPAssignmentModeDHCP, []string{it.autoName}
	case evaluator.AllocationStatic:
		e.IPAssignmentMode, e.IPAddressNames = sdnv1.IPAssignmentModeDHCP, []string{it.spec.IPAddressName}
	case evaluator.AllocationNone:
	default:
		return nil
	}
	return e
}

// transientReasons are problems that do not unplug an interface the object already carries:
// they pass on their own (SDN catching up, a network flapping), and yanking a NIC out of a
// running guest for them would hurt more than it helps. An interface whose policy evaluation
// failed is kept likewise. Every other problem unplugs.
var transientReasons = map[string]bool{
	string(evaluator.ReasonNetworkNotReady): true, string(evaluator.ReasonIPAddressPending): true,
	string(evaluator.ReasonIPAddressNotAllocated): true, string(evaluator.ReasonPolicyError): true,
}

func sticky(it *iface) bool {
	return it.decision.Allocation == evaluator.AllocationUnknown || it.problem != nil && transientReasons[it.problem.reason]
}

// entriesFor is the networks-spec for obj (the VM, or a running pod when live), interface by
// interface: the desired entry when it equals what obj has; obj's entry when the interface has
// a transient problem; for a running pod, obj's entry when the policy forbids hotplugging the
// change (the interface is then pending a restart); else the desired entry. Interfaces gone
// from the spec are unplugged.
func entriesFor(s *scope, obj client.Object, live bool) ([]sdnv1.NetworksSpecEntry, []string) {
	current, configured := obj.GetAnnotations()[sdnv1.AnnotationNetworksSpec]
	// A pod without any networks-spec started before vmipam configured it: its first
	// networks-spec is its initial configuration, not a change to a running guest.
	live = live && configured
	have := map[string]sdnv1.NetworksSpecEntry{}
	for _, e := range parseNetworksSpec(current) {
		have[index.NetworkKey(e.Type, e.Name)] = e
	}
	var out []sdnv1.NetworksSpecEntry
	var pending []string
	for _, it := range s.interfaces {
		if it.dupOf >= 0 {
			continue
		}
		want := attachedEntry(it)
		old, had := have[it.key]
		switch {
		case entryEqual(want, old, had):
		case want == nil && had && sticky(it):
			want = &old
		case live && !it.decision.Hotplug:
			pending = append(pending, it.key)
			want = nil
			if had {
				want = &old
			}
		}
		if want != nil {
			out = append(out, *want)
		}
	}
	if live {
		out, pending = keepRemoved(s, have, out, pending)
	}
	return out, pending
}

// keepRemoved keeps on a running pod the interfaces removed from the spec whose removal the
// decision does not let hotplug: they stay attached, with their address, until the restart.
func keepRemoved(s *scope, have map[string]sdnv1.NetworksSpecEntry, out []sdnv1.NetworksSpecEntry, pending []string) ([]sdnv1.NetworksSpecEntry, []string) {
	for _, it := range s.removed {
		if old, had := have[it.key]; had && !it.decision.Hotplug {
			out, pending = append(out, old), append(pending, it.key)
		}
	}
	return out, pending
}

func entryEqual(want *sdnv1.NetworksSpecEntry, old sdnv1.NetworksSpecEntry, had bool) bool {
	if want == nil || !had {
		return want == nil && !had
	}
	return equality.Semantic.DeepEqual(*want, old)
}

func mergePending(a, b []string) []string {
	for _, k := range b {
		found := false
		for _, x := range a {
			found = found || x == k
		}
		if !found {
			a = append(a, k)
		}
	}
	return a
}

// networksSpecWrite compares entries with obj's annotation. An object without the annotation
// and with nothing to attach is left alone.
func networksSpecWrite(obj client.Object, entries []sdnv1.NetworksSpecEntry) NetworksSpecWrite {
	current, had := obj.GetAnnotations()[sdnv1.AnnotationNetworksSpec]
	if entries == nil {
		entries = []sdnv1.NetworksSpecEntry{}
	}
	data, _ := json.Marshal(entries) // plain structs of strings and ints: cannot fail
	w := NetworksSpecWrite{Entries: entries, value: string(data)}
	// Compare what the annotation says, not its bytes: the virtualization controller writes the
	// same annotation, and two encodings of the same entries must not make the two rewrite each
	// other. An unreadable annotation is rewritten.
	parsed, err := sdnv1.ParseNetworksSpec(current)
	w.Changed = (err != nil || !sdnv1.NetworksSpecEqual(parsed, entries)) && (len(entries) > 0 || had)
	return w
}
