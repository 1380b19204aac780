package policytest

import (
	"fmt"

	"github.com/vmipam/vmipam/evaluator"
)

// checkChange refuses an input whose `change` contradicts itself or the interface, as the
// controller never computes one: a case testing a hotplug rule on an impossible change proves
// nothing about the policy. The rules (docs/POLICY-TESTS.md):
//
//   - kind is None, Add, Remove, ModeChange or AddressChange, or the whole change is absent;
//   - each side's allocation is Auto, Static, None or "" (not applied), and it names an
//     IPAddress exactly when it is Static;
//   - Add: nothing is applied (from is empty) and something will be (to.allocation set);
//     Remove: the reverse; None: both sides equal (both empty for an interface that is neither
//     attached nor will be: a skipped one); ModeChange: both set and their allocations differ;
//     AddressChange: equal allocations, different IPAddresses;
//   - a Static `to` names the interface's ipAddressName unless it keeps what is applied (a
//     transient skip keeps the attached address while the spec names another); the Static
//     `from` of an interface the spec no longer names (index -1) names its ipAddressName.
//
// The sides are the applied state and the decided outcome, not what the spec asks for
// (docs/POLICIES.md, "The change input").
func checkChange(in evaluator.Input) error {
	c := in.Change
	if c == (evaluator.Change{}) {
		return nil
	}
	if err := checkChangeState("from", c.From); err != nil {
		return err
	}
	if err := checkChangeState("to", c.To); err != nil {
		return err
	}
	if err := checkChangeKind(c); err != nil {
		return err
	}
	name := in.Interface.IPAddressName
	switch {
	case c.To.Allocation == string(evaluator.AllocationStatic) && c.To != c.From && c.To.IPAddressName != name:
		return fmt.Errorf("input: change.to.ipAddressName %q is not the interface's ipAddressName %q", c.To.IPAddressName, name)
	case c.Kind == evaluator.ChangeRemove && in.Interface.Index < 0 && c.From.IPAddressName != name:
		return fmt.Errorf("input: change.from.ipAddressName %q of a removed interface is not the interface's ipAddressName %q",
			c.From.IPAddressName, name)
	}
	return nil
}

// checkChangeState checks one side of a change.
func checkChangeState(side string, st evaluator.ChangeState) error {
	switch evaluator.Allocation(st.Allocation) {
	case evaluator.AllocationAuto, evaluator.AllocationNone, evaluator.AllocationUnknown:
		if st.IPAddressName != "" {
			return fmt.Errorf("input: change.%s names IPAddress %q, but its allocation is %q: only a Static one names one",
				side, st.IPAddressName, st.Allocation)
		}
	case evaluator.AllocationStatic:
		if st.IPAddressName == "" {
			return fmt.Errorf("input: change.%s is Static without an ipAddressName", side)
		}
	default:
		return fmt.Errorf("input: change.%s.allocation: Unsupported value %q: supported values: \"Auto\", \"Static\", \"None\", \"\"",
			side, st.Allocation)
	}
	return nil
}

// checkChangeKind checks that a change's kind is the one its sides make.
func checkChangeKind(c evaluator.Change) error {
	applied, wanted := c.From.Allocation != "", c.To.Allocation != ""
	var ok bool
	switch c.Kind {
	case evaluator.ChangeAdd:
		ok = !applied && wanted
	case evaluator.ChangeRemove:
		ok = applied && !wanted
	case evaluator.ChangeNone:
		ok = c.From == c.To
	case evaluator.ChangeModeChange:
		ok = applied && wanted && c.From.Allocation != c.To.Allocation
	case evaluator.ChangeAddressChange:
		ok = applied && c.From.Allocation == c.To.Allocation && c.From.IPAddressName != c.To.IPAddressName
	default:
		return fmt.Errorf("input: change.kind: Unsupported value %q: supported values: \"None\", \"Add\", \"Remove\", "+
			"\"ModeChange\", \"AddressChange\"", c.Kind)
	}
	if !ok {
		return fmt.Errorf("input: change.kind %s contradicts change.from %+v and change.to %+v", c.Kind, c.From, c.To)
	}
	return nil
}
