package evaluator

import "fmt"

// GuardRulePrefix starts Decision.Rule when the evaluator itself, not a policy's skip rule,
// skipped an interface the deciding policy attached: "vmipam:<check>", e.g.
// "vmipam:static-held-by-another-vm".
const GuardRulePrefix = "vmipam:"

// guardCheck is one condition under which an interface cannot have the address the deciding
// policy gave it.
type guardCheck struct {
	name   string
	fails  func(in *Input) bool
	reason Reason
	// message says what is wrong; target is "<kind> <name>" of the interface's network.
	message func(in *Input, target string) string
}

// staticGuard and autoGuard are the checks guard makes, in order; they mirror the skip rules of
// the default policy (policies/default.yaml), so that a policy that leaves them out still
// cannot hand one guest's address to another (DESIGN.md §4.4) or make NetworkReady claim an
// address that is not there.
var staticGuard = []guardCheck{
	{"static-without-name", func(in *Input) bool { return in.Interface.IPAddressName == "" }, ReasonIPAddressNotFound,
		func(in *Input, _ string) string {
			return fmt.Sprintf("the policy chose Static, but spec.networks[%d].ipAddressName is empty", in.Interface.Index)
		}},
	{"network-missing", func(in *Input) bool { return !in.Network.Exists }, ReasonNetworkNotFound,
		func(_ *Input, target string) string { return target + " does not exist" }},
	{"address-on-pool-less-network", func(in *Input) bool { return !in.Network.IPAMEnabled }, ReasonNoIPAMPool,
		func(in *Input, target string) string {
			return "ipAddressName " + in.Interface.IPAddressName + " is set, but " + target + " has no IPAM pool"
		}},
	{"static-missing", func(in *Input) bool { return !in.IPAddress.Exists }, ReasonIPAddressNotFound,
		func(in *Input, _ string) string {
			return "IPAddress " + in.Interface.IPAddressName + " does not exist in namespace " + in.VM.Namespace
		}},
	{"static-owned-by-another-vm", func(in *Input) bool {
		return in.IPAddress.Type == "Auto" && in.IPAddress.Owner.UID != "" && in.IPAddress.Owner.UID != in.VM.UID
	}, ReasonIPAddressOwnedByAnotherVM,
		func(in *Input, _ string) string {
			return "IPAddress " + in.IPAddress.Name + " is the automatic address of VM " + in.IPAddress.Owner.Name
		}},
	{"static-other-network", func(in *Input) bool {
		return in.IPAddress.NetworkRef.Kind != in.Interface.Type || in.IPAddress.NetworkRef.Name != in.Interface.Name
	}, ReasonIPAddressNetworkMismatch,
		func(in *Input, target string) string {
			return "IPAddress " + in.IPAddress.Name + " belongs to " + in.IPAddress.NetworkRef.Kind + " " +
				in.IPAddress.NetworkRef.Name + ", not to " + target
		}},
	{"static-held-by-another-vm", func(in *Input) bool { return in.Holders.Holder != "" && in.Holders.Holder != in.VM.Name },
		ReasonIPAddressInUse,
		func(in *Input, _ string) string {
			return "IPAddress " + in.IPAddress.Name + " is in use by VM " + in.Holders.Holder
		}},
	{"static-not-allocated", func(in *Input) bool { return !in.IPAddress.Allocated }, ReasonIPAddressNotAllocated,
		func(in *Input, _ string) string { return "IPAddress " + in.IPAddress.Name + " is not allocated yet" }},
}

var autoGuard = []guardCheck{
	{"network-missing", func(in *Input) bool { return !in.Network.Exists }, ReasonNetworkNotFound,
		func(_ *Input, target string) string { return target + " does not exist" }},
	{"auto-on-pool-less-network", func(in *Input) bool { return !in.Network.IPAMEnabled }, ReasonNoIPAMPool,
		func(_ *Input, target string) string {
			return "the policy chose Auto, but " + target + " has no IPAM pool"
		}},
	{"pool-exhausted", func(in *Input) bool { return autoInput(in) && in.IPAddress.Reason == "NoFreeIPAddress" }, ReasonPoolExhausted,
		func(in *Input, target string) string {
			return "no free address in pool " + in.Network.Pool.Name + " of " + target
		}},
	{"auto-pending", func(in *Input) bool { return autoInput(in) && !in.IPAddress.Allocated }, ReasonIPAddressPending,
		func(in *Input, _ string) string { return "waiting for SDN to allocate IPAddress " + in.IPAddress.Name }},
}

// autoInput reports whether in.IPAddress is the interface's own Auto IPAddress (it describes
// the named static IPAddress instead when ipAddressName is set).
func autoInput(in *Input) bool { return in.Interface.IPAddressName == "" }

// guard returns d, or, when d attaches the interface with an address (Auto or Static, not
// skipped) that it cannot have, d skipped with the reason and message of the first failing
// check and Rule GuardRulePrefix+check. The default policy's own skip rules fire first, so
// with it guard never changes a decision.
func guard(in *Input, d Decision) Decision {
	if d.Skip {
		return d
	}
	checks := autoGuard
	switch d.Allocation {
	case AllocationStatic:
		checks = staticGuard
	case AllocationAuto:
	default:
		return d
	}
	target := in.Interface.Type + " " + in.Interface.Name
	for _, c := range checks {
		if c.fails(in) {
			d.Skip, d.Reason, d.Message, d.Rule = true, c.reason, c.message(in, target), GuardRulePrefix+c.name
			return d
		}
	}
	return d
}
