package consumer_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

const (
	uid = "vm-uid"
	mac = "02:00:00:00:00:01"
)

// decision is an InterfaceDecision on ClusterNetwork name; opts adjust it.
func decision(name string, opts ...func(*v1alpha1.InterfaceDecision)) v1alpha1.InterfaceDecision {
	d := v1alpha1.InterfaceDecision{Type: "ClusterNetwork", Name: name, Allocation: v1alpha1.AllocationAuto,
		IPAddressName: name + "-ip", Attach: true, Hotplug: true}
	for _, o := range opts {
		o(&d)
	}
	return d
}

func static(ip string) func(*v1alpha1.InterfaceDecision) {
	return func(d *v1alpha1.InterfaceDecision) { d.Allocation, d.IPAddressName = v1alpha1.AllocationStatic, ip }
}

func skipped(reason, msg string) func(*v1alpha1.InterfaceDecision) {
	return func(d *v1alpha1.InterfaceDecision) { d.Attach, d.Reason, d.Message = false, reason, msg }
}

func transient(reason, msg string) func(*v1alpha1.InterfaceDecision) {
	return func(d *v1alpha1.InterfaceDecision) { d.Reason, d.Message = reason, msg }
}

func noHotplug(d *v1alpha1.InterfaceDecision) { d.Hotplug = false }

func removed(d *v1alpha1.InterfaceDecision) { d.Removed, d.Hotplug = true, false }

func l2(d *v1alpha1.InterfaceDecision) { d.Allocation, d.IPAddressName = v1alpha1.AllocationNone, "" }

// record is a record of generation 3 for VM uid at VM generation 5.
func record(ds ...v1alpha1.InterfaceDecision) *v1alpha1.VirtualMachineIPAM {
	return &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: uid, VMGeneration: 5, Interfaces: ds}}
}

// entry is the networks-spec entry Apply writes for ClusterNetwork name carrying ip ("" for L2).
func entry(name, ip string) sdnv1.NetworksSpecEntry {
	e := sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: name, IfName: consumer.IfName("ClusterNetwork", mac),
		UID: consumer.NICUserID, GID: consumer.NICUserID}
	if ip != "" {
		e.IPAssignmentMode, e.IPAddressNames = sdnv1.IPAssignmentModeDHCP, []string{ip}
	}
	return e
}

// input is a running, decided VM at generation 5 with ClusterNetworks names, carrying applied.
func input(rec *v1alpha1.VirtualMachineIPAM, applied []sdnv1.NetworksSpecEntry, names ...string) consumer.Input {
	in := consumer.Input{UID: uid, Generation: 5, Record: rec, Running: true, Decided: true, Applied: applied}
	for _, n := range names {
		in.Networks = append(in.Networks, consumer.Network{Type: "ClusterNetwork", Name: n, MAC: mac})
	}
	return in
}

func stopped(in consumer.Input) consumer.Input {
	in.Running, in.Applied, in.Decided = false, nil, false
	return in
}

func TestApply(t *testing.T) {
	none := []sdnv1.NetworksSpecEntry{}
	tests := []struct {
		name string
		in   consumer.Input
		want consumer.Result
	}{{
		name: "an attached Auto interface is provisioned with its IPAddress by DHCP, live and at the next start, with its address",
		in:   input(record(decision("corp", func(d *v1alpha1.InterfaceDecision) { d.Address = "10.0.0.5" })), nil, "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip")),
			Live: entries(entry("corp", "corp-ip")), Addresses: map[string]string{"ClusterNetwork/corp": "10.0.0.5"}},
	}, {
		name: "an L2-only interface is provisioned without an address",
		in:   stopped(input(record(decision("lan", l2)), nil, "lan")),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("lan", ""))},
	}, {
		name: "a skipped interface is not provisioned and its reason and message are its item",
		in:   input(record(decision("corp", static("web"), skipped("IPAddressNotFound", "IPAddress web does not exist"))), nil, "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, Live: none,
			Items: []consumer.Item{{Label: "ClusterNetwork/corp", Reason: "IPAddressNotFound", Message: "IPAddress web does not exist"}}},
	}, {
		name: "an interface attached through a transient problem stays provisioned and reports it",
		in:   input(record(decision("corp", transient("NetworkNotReady", "ClusterNetwork corp is not Ready"))), entries(entry("corp", "corp-ip")), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip")),
			Live:  entries(entry("corp", "corp-ip")),
			Items: []consumer.Item{{Label: "ClusterNetwork/corp", Reason: "NetworkNotReady", Message: "ClusterNetwork corp is not Ready"}}},
	}, {
		name: "an added interface is hot-plugged when its decision allows it",
		in:   input(record(decision("corp"), decision("lan", l2)), entries(entry("corp", "corp-ip")), "corp", "lan"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip"), entry("lan", "")),
			Live: entries(entry("corp", "corp-ip"), entry("lan", ""))},
	}, {
		name: "an added interface whose decision forbids hotplug waits for the next start, with an AwaitingRestart item",
		in:   input(record(decision("corp"), decision("lan", l2, noHotplug)), entries(entry("corp", "corp-ip")), "corp", "lan"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip"), entry("lan", "")),
			Live: entries(entry("corp", "corp-ip")), Held: []string{"ClusterNetwork/lan"},
			Items: []consumer.Item{{Label: "ClusterNetwork/lan", Reason: consumer.ReasonAwaitingRestart,
				Message: "the running VM does not have this interface: it is attached at the next restart (hotplug not allowed)"}}},
	}, {
		name: "a switched address without hotplug keeps the old address on the running VM and the new one for the next start",
		in:   input(record(decision("corp", static("web"), noHotplug)), entries(entry("corp", "corp-ip")), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "web")),
			Live: entries(entry("corp", "corp-ip")), Held: []string{"ClusterNetwork/corp"}},
	}, {
		name: "a switched address with hotplug is applied live",
		in:   input(record(decision("corp", static("web"))), entries(entry("corp", "corp-ip")), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "web")),
			Live: entries(entry("corp", "web"))},
	}, {
		name: "a skipped interface without hotplug stays attached until the next start",
		in: input(record(decision("corp", static("web"), skipped("IPAddressInUse", "in use by VM db"), noHotplug)),
			entries(entry("corp", "web")), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, Live: entries(entry("corp", "web")), Held: []string{"ClusterNetwork/corp"},
			Items: []consumer.Item{{Label: "ClusterNetwork/corp", Reason: "IPAddressInUse", Message: "in use by VM db"}}},
	}, {
		name: "a removal the record holds keeps the interface and its address until the next start",
		in:   input(record(decision("corp"), decision("old", removed)), entries(entry("corp", "corp-ip"), entry("old", "old-ip")), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip")),
			Live: entries(entry("corp", "corp-ip"), entry("old", "old-ip")), Held: []string{"ClusterNetwork/old"}},
	}, {
		name: "an applied interface the record does not list is unplugged",
		in:   input(record(decision("corp")), entries(entry("corp", "corp-ip"), entry("old", "old-ip")), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip")),
			Live: entries(entry("corp", "corp-ip"))},
	}, {
		name: "a pod started before any record takes the first record as its initial configuration, whatever hotplug says",
		in: func() consumer.Input {
			in := input(record(decision("corp", noHotplug)), nil, "corp")
			in.Decided = false
			return in
		}(),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip")),
			Live: entries(entry("corp", "corp-ip"))},
	}, {
		name: "a repeated network is provisioned once, and the repeat's item is reported",
		in: input(record(decision("corp"), decision("corp", skipped("DuplicateInterface", "spec.networks[2] repeats spec.networks[1]"))),
			nil, "corp", "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true, NextBoot: entries(entry("corp", "corp-ip")),
			Live:  entries(entry("corp", "corp-ip")),
			Items: []consumer.Item{{Label: "ClusterNetwork/corp", Reason: "DuplicateInterface", Message: "spec.networks[2] repeats spec.networks[1]"}}},
	}, {
		name: "an id and a MAC difference is no change: what runs stays as it is",
		in: input(record(decision("corp", func(d *v1alpha1.InterfaceDecision) { d.ID = ptr.To[int64](4) })),
			entries(sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_cnold",
				IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{"corp-ip"}}), "corp"),
		want: consumer.Result{RecordGeneration: 3, Decided: true,
			NextBoot: entries(func() sdnv1.NetworksSpecEntry { e := entry("corp", "corp-ip"); e.ID = 4; return e }()),
			Live: entries(sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "corp", IfName: "veth_cnold",
				IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{"corp-ip"}})},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, consumer.Apply(tt.in), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Apply (-want +got):\n%s", diff)
			}
		})
	}
}

// TestApplyWithoutADecidingRecordChangesNothing pins the three ways a record does not decide:
// none, one of an earlier VM of the same name, one older than the VM's generation.
func TestApplyWithoutADecidingRecordChangesNothing(t *testing.T) {
	applied := entries(entry("corp", "corp-ip"))
	template := entries(entry("corp", "corp-ip"), entry("lan", ""))
	other := record(decision("corp", static("web")))
	other.Spec.VMUID = "an-earlier-vm"
	older := record(decision("corp", static("web")))
	older.Spec.VMGeneration = 4
	for name, tc := range map[string]struct {
		rec *v1alpha1.VirtualMachineIPAM
		msg string
	}{
		"no record":                     {nil, "waiting for the IPAM decision (VirtualMachineIPAM) of this VM"},
		"a record of another VM UID":    {other, "waiting for the IPAM decision (VirtualMachineIPAM) of this VM"},
		"a record of an older VM spec ": {older, "waiting for the IPAM decision of VM generation 5 (the record decides generation 4)"},
	} {
		t.Run(name, func(t *testing.T) {
			in := input(tc.rec, applied, "corp", "lan")
			in.NextBoot = template
			want := consumer.Result{Decided: true, NextBoot: template, Live: applied, Items: []consumer.Item{
				{Label: "ClusterNetwork/corp", Reason: consumer.ReasonDecisionPending, Message: tc.msg},
				{Label: "ClusterNetwork/lan", Reason: consumer.ReasonDecisionPending, Message: tc.msg}}}
			if diff := cmp.Diff(want, consumer.Apply(in), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Apply (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMigrationTargetCarriesWhatRuns pins that a migration is not a start: the list a target is
// made from (Live) never holds a change held until restart, which only NextBoot has — neither
// an added interface nor a held removal's absence.
func TestMigrationTargetCarriesWhatRuns(t *testing.T) {
	rec := record(decision("corp"), decision("lan", l2, noHotplug), decision("old", removed))
	res := consumer.Apply(input(rec, entries(entry("corp", "corp-ip"), entry("old", "old-ip")), "corp", "lan"))
	if want := entries(entry("corp", "corp-ip"), entry("old", "old-ip")); !cmp.Equal(res.Live, want) {
		t.Errorf("Live = %v, want what runs %v", res.Live, want)
	}
	if want := entries(entry("corp", "corp-ip"), entry("lan", "")); !cmp.Equal(res.NextBoot, want) {
		t.Errorf("NextBoot = %v, want the record's %v", res.NextBoot, want)
	}
}

func TestNetworkReady(t *testing.T) {
	ready := consumer.NetworkReady(nil, 2, 7)
	if ready.Status != metav1.ConditionTrue || ready.Message != "All additional network interfaces are attached (2)" || ready.ObservedGeneration != 7 {
		t.Errorf("NetworkReady(no items) = %+v", ready)
	}
	items := []consumer.Item{{Label: "ClusterNetwork/corp", Reason: "IPAddressNotFound", Message: "IPAddress web does not exist"},
		{Label: consumer.Label("Network", "a; b"), Reason: "NetworkNotFound", Message: "gone"}}
	c := consumer.NetworkReady(items, 2, 7)
	want := `ClusterNetwork/corp: IPAddressNotFound: IPAddress web does not exist; Network/"a\x3b b": NetworkNotFound: gone`
	if c.Status != metav1.ConditionFalse || c.Reason != consumer.ReasonNetworkNotReady || c.Message != want {
		t.Errorf("NetworkReady = %s/%s %q, want False/NetworkNotReady %q", c.Status, c.Reason, c.Message, want)
	}
}

// TestNetworkReadyBoundsEveryItem pins that no item can push the others out of the condition's
// 32 KiB: each is cut to its share.
func TestNetworkReadyBoundsEveryItem(t *testing.T) {
	var items []consumer.Item
	for i := 0; i < 40; i++ {
		items = append(items, consumer.Item{Label: "ClusterNetwork/n", Reason: "PolicyError", Message: strings.Repeat("é", 5000)})
	}
	c := consumer.NetworkReady(items, 40, 1)
	if len(c.Message) > consumer.MaxConditionMessage || strings.Count(c.Message, "; ") != 39 {
		t.Errorf("message of %d bytes with %d separators, want ≤ %d bytes and all 40 items", len(c.Message),
			strings.Count(c.Message, "; "), consumer.MaxConditionMessage)
	}
	if !strings.HasSuffix(c.Message, "...") || strings.ContainsRune(c.Message, '\uFFFD') {
		t.Errorf("cut items must end in ... on a character boundary: %q", c.Message[len(c.Message)-20:])
	}
}

func TestAwaitingRestart(t *testing.T) {
	if c := consumer.AwaitingRestart(nil, 1); c != nil {
		t.Errorf("AwaitingRestart(nothing held) = %+v, want nil", c)
	}
	c := consumer.AwaitingRestart([]string{"ClusterNetwork/corp", "Network/lan"}, 4)
	if c.Reason != consumer.ReasonChangesPendingRestart || c.ObservedGeneration != 4 ||
		c.Message != "Changes of these interfaces apply at the next restart: ClusterNetwork/corp, Network/lan" {
		t.Errorf("AwaitingRestart = %+v", c)
	}
}

func TestIfNameFollowsTheVirtualizationController(t *testing.T) {
	// printf %s 02:00:00:00:00:01 | md5sum: 664af1a949e673a78e2e548696f69cd8
	for typ, want := range map[string]string{"ClusterNetwork": "veth_cn664af1a9", "Network": "veth_n664af1a9"} {
		if got := consumer.IfName(typ, mac); got != want {
			t.Errorf("IfName(%s, %s) = %q, want %q", typ, mac, got, want)
		}
	}
}

func entries(es ...sdnv1.NetworksSpecEntry) []sdnv1.NetworksSpecEntry { return es }
