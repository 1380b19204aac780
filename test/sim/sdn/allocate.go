package sdn

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// outcome is SDN's answer for one IPAddress: an address, its subnet and the subnet's routes
// when reason is sdnv1.ReasonIPAddressAllocated, else the reason and message of
// Allocated=False.
type outcome struct {
	addr    netip.Addr
	prefix  netip.Prefix
	routes  []sdnv1.Route
	reason  string
	message string
}

// ok reports whether the outcome is an allocation.
func (o outcome) ok() bool { return o.reason == sdnv1.ReasonIPAddressAllocated }

// allocated is the outcome that hands out a from sub.
func allocated(a netip.Addr, sub *subnet) outcome {
	return outcome{addr: a, prefix: sub.prefix, routes: sub.routes,
		reason: sdnv1.ReasonIPAddressAllocated, message: "allocated " + a.String()}
}

// failed is an outcome that allocates nothing.
func failed(reason, format string, args ...any) *outcome {
	return &outcome{reason: reason, message: fmt.Sprintf(format, args...)}
}

// choose picks the address for an IPAddress with spec from space, never one that use reports
// held or leased: Auto takes the first free address in allocation order, Static the one it asks
// for when that is in the pool and free.
func choose(spec sdnv1.IPAddressSpec, space addressSpace, use func(netip.Addr) usage) outcome {
	if spec.Type == sdnv1.IPAddressTypeStatic {
		return chooseStatic(spec.Static, space, use)
	}
	if a, sub, ok := space.next(func(a netip.Addr) bool { return use(a) != free }); ok {
		return allocated(a, sub)
	}
	return *failed(sdnv1.ReasonNoFreeIPAddress, "no free address left in the pool")
}

// chooseStatic checks the address a Static IPAddress asks for.
func chooseStatic(static *sdnv1.StaticIP, space addressSpace, use func(netip.Addr) usage) outcome {
	if static == nil {
		return *failed(ReasonInvalidIPAddress, "spec.static.ip is required for a Static IPAddress")
	}
	a, err := netip.ParseAddr(strings.TrimSpace(static.IP))
	if err != nil {
		return *failed(ReasonInvalidIPAddress, "spec.static.ip: %v", err)
	}
	sub, ok := space.locate(a)
	if !ok {
		return *failed(ReasonIPOutOfRange, "%s is not in the ranges of the pool", a)
	}
	switch use(a) {
	case held:
		return *failed(ReasonIPInUse, "%s is allocated to another IPAddress", a)
	case leased:
		return *failed(ReasonIPLeased, "%s is kept by an orphaned IPAddressLease until it expires", a)
	}
	return allocated(a, sub)
}

// setStatus writes o into st: address, network, routes, phase and the Allocated condition.
func setStatus(st *sdnv1.IPAddressStatus, o outcome, generation int64) {
	cond := metav1.Condition{
		Type: sdnv1.ConditionAllocated, Status: metav1.ConditionFalse,
		Reason: o.reason, Message: o.message, ObservedGeneration: generation,
	}
	st.Address, st.Network, st.Routes, st.Phase = "", "", nil, sdnv1.IPAddressPhasePending
	if o.ok() {
		st.Address, st.Network, st.Routes, st.Phase = o.addr.String(), o.prefix.String(), o.routes, sdnv1.IPAddressPhaseAllocated
		cond.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}
