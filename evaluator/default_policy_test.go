package evaluator_test

import (
	"context"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

func TestDefaultPolicy(t *testing.T) {
	set := defaultSet(t, newCompiler(t))
	cases := []struct {
		name       string
		in         func() evaluator.Input
		allocation evaluator.Allocation
		reason     evaluator.Reason // "" = attached
		message    string           // substring of the message
	}{
		{"pooled network without ipAddressName is Auto", pooledAuto, evaluator.AllocationAuto, "", ""},
		{"pooled network with ipAddressName is Static", pooledStatic, evaluator.AllocationStatic, "", ""},
		{"pool-less network is L2 only", func() evaluator.Input {
			in := pooledAuto()
			in.Network.IPAMEnabled, in.Network.Pool = false, evaluator.Ref{}
			in.IPAddress = evaluator.IPAddress{}
			return in
		}, evaluator.AllocationNone, "", ""},
		{"missing network is skipped", func() evaluator.Input {
			in := pooledAuto()
			in.Network = evaluator.Network{}
			return in
		}, evaluator.AllocationNone, evaluator.ReasonNetworkNotFound, "ClusterNetwork corp does not exist"},
		{"network not Ready is skipped but keeps its Auto claim", func() evaluator.Input {
			in := pooledAuto()
			in.Network.Ready = false
			return in
		}, evaluator.AllocationAuto, evaluator.ReasonNetworkNotReady, "is not Ready"},
		{"ipAddressName on a pool-less network is skipped", func() evaluator.Input {
			in := pooledStatic()
			in.Network.IPAMEnabled = false
			return in
		}, evaluator.AllocationNone, evaluator.ReasonNoIPAMPool, "ipAddressName web is set"},
		{"missing static IPAddress is skipped", func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress = evaluator.IPAddress{}
			return in
		}, evaluator.AllocationStatic, evaluator.ReasonIPAddressNotFound, "IPAddress web does not exist in namespace ns"},
		{"another VM's Auto IPAddress cannot be used as static", func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.Type, in.IPAddress.Owner = "Auto", evaluator.Owner{Name: "vm-b", UID: "uid-b"}
			return in
		}, evaluator.AllocationStatic, evaluator.ReasonIPAddressOwnedByAnotherVM, "automatic address of VM vm-b"},
		{"static IPAddress of another network is skipped", func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.NetworkRef = evaluator.Ref{Kind: "Network", Name: "corp"}
			return in
		}, evaluator.AllocationStatic, evaluator.ReasonIPAddressNetworkMismatch, "belongs to Network corp"},
		{"static IPAddress held by another VM is skipped, naming the holder", func() evaluator.Input {
			in := pooledStatic()
			in.Holders = evaluator.Holders{VMs: []string{"vm-old"}, Holder: "vm-old"}
			return in
		}, evaluator.AllocationStatic, evaluator.ReasonIPAddressInUse, "in use by VM vm-old"},
		{"the holder itself keeps the static IPAddress", func() evaluator.Input {
			in := pooledStatic()
			in.Holders = evaluator.Holders{VMs: []string{"vm-new"}, Holder: "vm-a"}
			return in
		}, evaluator.AllocationStatic, "", ""},
		{"unallocated static IPAddress is skipped", func() evaluator.Input {
			in := pooledStatic()
			in.IPAddress.Allocated, in.IPAddress.Address, in.IPAddress.Phase = false, "", "Pending"
			return in
		}, evaluator.AllocationStatic, evaluator.ReasonIPAddressNotAllocated, "not allocated yet"},
		{"pending Auto IPAddress is skipped", func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.Allocated, in.IPAddress.Address = false, ""
			return in
		}, evaluator.AllocationAuto, evaluator.ReasonIPAddressPending, "waiting for SDN"},
		{"Auto IPAddress not created yet is pending", func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress = evaluator.IPAddress{Name: "vm-a-clusternetwork-corp"}
			return in
		}, evaluator.AllocationAuto, evaluator.ReasonIPAddressPending, "vm-a-clusternetwork-corp"},
		{"exhausted pool has its own reason", func() evaluator.Input {
			in := pooledAuto()
			in.IPAddress.Allocated, in.IPAddress.Address, in.IPAddress.Reason = false, "", "NoFreeIPAddress"
			return in
		}, evaluator.AllocationAuto, evaluator.ReasonPoolExhausted, "no free address in pool corp-pool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := set.Decide(context.Background(), tc.in(), evaluator.Options{})
			if d.Allocation != tc.allocation {
				t.Errorf("allocation = %q, want %q (decision %+v)", d.Allocation, tc.allocation, d)
			}
			if d.Skip != (tc.reason != "") || d.Reason != tc.reason {
				t.Errorf("skip = %v reason = %q, want reason %q (message %q)", d.Skip, d.Reason, tc.reason, d.Message)
			}
			if !strings.Contains(d.Message, tc.message) {
				t.Errorf("message = %q, want it to contain %q", d.Message, tc.message)
			}
			if d.Policy != evaluator.BuiltinPolicy || !d.Hotplug || d.Cost <= 0 {
				t.Errorf("policy = %q hotplug = %v cost = %d, want the built-in default, hotplug, a cost", d.Policy, d.Hotplug, d.Cost)
			}
		})
	}
}
