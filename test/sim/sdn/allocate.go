package sdn

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// outcome is SDN's answer for one IPAddress: an address and its subnet when reason is
// ReasonAllocated, else the reason and message of Allocated=False.
type outcome struct {
	addr    netip.Addr
	prefix  netip.Prefix
	reason  string
	message string
}

// ok reports whether the outcome is an allocation.
func (o outcome) ok() bool { return o.reason == ReasonAllocated }

// allocated is the outcome that hands out a from subnet p.
func allocated(a netip.Addr, p netip.Prefix) outcome {
	return outcome{addr: a, prefix: p, reason: ReasonAllocated, message: "allocated " + a.String()}
}

// failed is an outcome that allocates nothing.
func failed(reason, format string, args ...any) *outcome {
	return &outcome{reason: reason, message: fmt.Sprintf(format, args...)}
}

// choose picks the address for an IPAddress with spec from space, never one that taken
// reports. leased, when valid, is the address a lease keeps for this IPAddress; Auto prefers it.
func choose(spec sdnv1.IPAddressSpec, space addressSpace, taken func(netip.Addr) bool, leased netip.Addr) outcome {
	if spec.Type == sdnv1.IPAddressTypeStatic {
		return chooseStatic(spec.Static, space, taken)
	}
	if leased.IsValid() && !taken(leased) {
		if p, ok := space.locate(leased); ok {
			return allocated(leased, p)
		}
	}
	if a, p, ok := space.next(taken); ok {
		return allocated(a, p)
	}
	return *failed(sdnv1.ReasonNoFreeIPAddress, "no free address left in the pool")
}

// chooseStatic checks the address a Static IPAddress asks for.
func chooseStatic(static *sdnv1.StaticIP, space addressSpace, taken func(netip.Addr) bool) outcome {
	if static == nil {
		return *failed(ReasonInvalidIPAddress, "spec.static.ip is required for a Static IPAddress")
	}
	a, err := netip.ParseAddr(strings.TrimSpace(static.IP))
	if err != nil {
		return *failed(ReasonInvalidIPAddress, "spec.static.ip: %v", err)
	}
	p, ok := space.locate(a)
	if !ok {
		return *failed(ReasonIPOutOfRange, "%s is not in the ranges of the pool", a)
	}
	if taken(a) {
		return *failed(ReasonIPAlreadyAllocated, "%s is already allocated", a)
	}
	return allocated(a, p)
}

// setStatus writes o into st: address, network, phase and the Allocated condition.
func setStatus(st *sdnv1.IPAddressStatus, o outcome, generation int64) {
	cond := metav1.Condition{
		Type: sdnv1.ConditionAllocated, Status: metav1.ConditionFalse,
		Reason: o.reason, Message: o.message, ObservedGeneration: generation,
	}
	st.Address, st.Network, st.Phase = "", "", sdnv1.IPAddressPhasePending
	if o.ok() {
		st.Address, st.Network, st.Phase = o.addr.String(), o.prefix.String(), sdnv1.IPAddressPhaseAllocated
		cond.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}
