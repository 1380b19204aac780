package sdn

import (
	"fmt"
	"net/netip"
	"strings"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// addrRange is an inclusive range of addresses of one family.
type addrRange struct {
	first, last netip.Addr
}

// contains reports whether a lies in the range.
func (r addrRange) contains(a netip.Addr) bool {
	return r.first.Compare(a) <= 0 && a.Compare(r.last) <= 0
}

// parseRange parses an inclusive "a.b.c.d-a.b.c.e" range.
func parseRange(s string) (addrRange, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return addrRange{}, fmt.Errorf("range %q: want first-last", s)
	}
	first, err := netip.ParseAddr(strings.TrimSpace(lo))
	if err != nil {
		return addrRange{}, fmt.Errorf("range %q: %w", s, err)
	}
	last, err := netip.ParseAddr(strings.TrimSpace(hi))
	if err != nil {
		return addrRange{}, fmt.Errorf("range %q: %w", s, err)
	}
	if first.BitLen() != last.BitLen() {
		return addrRange{}, fmt.Errorf("range %q mixes address families", s)
	}
	if last.Less(first) {
		return addrRange{}, fmt.Errorf("range %q ends before it starts", s)
	}
	return addrRange{first: first, last: last}, nil
}

// lastAddr is the highest address of p (the broadcast address of an IPv4 subnet).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// hostRange is the allocatable part of the IPv4 subnet p when a pool gives no ranges, as SDN
// documents it: the whole CIDR but its network and broadcast addresses; a /31 gives both of its
// addresses and a /32 its one address (RFC 3021). No address is withheld as a gateway.
func hostRange(p netip.Prefix) addrRange {
	p = p.Masked()
	first, last := p.Addr(), lastAddr(p)
	if p.Bits() <= 30 {
		first, last = first.Next(), last.Prev()
	}
	return addrRange{first: first, last: last}
}

// subnet is the allocatable space of one pools[] entry, and the routes it hands out.
type subnet struct {
	prefix netip.Prefix
	ranges []addrRange
	routes []sdnv1.Route
}

// addressSpace is the allocatable space of a pool, in allocation order: pools[] in order, each
// subnet's ranges in order, each range from low to high.
type addressSpace []subnet

// parseSpace reads a pool's pools[] into an addressSpace. Ranges must lie inside their subnet.
func parseSpace(pools []sdnv1.Subnet) (addressSpace, error) {
	space := make(addressSpace, 0, len(pools))
	for i, p := range pools {
		sub, err := parseSubnet(p)
		if err != nil {
			return nil, fmt.Errorf("pools[%d]: %w", i, err)
		}
		space = append(space, sub)
	}
	return space, nil
}

// parseSubnet reads one pools[] entry.
func parseSubnet(p sdnv1.Subnet) (subnet, error) {
	prefix, err := netip.ParsePrefix(strings.TrimSpace(p.Network))
	if err != nil {
		return subnet{}, fmt.Errorf("network: %w", err)
	}
	if !prefix.Addr().Is4() {
		return subnet{}, fmt.Errorf("network %s: SDN is IPv4-only", prefix)
	}
	sub := subnet{prefix: prefix.Masked(), routes: p.Routes}
	if len(p.Ranges) == 0 {
		sub.ranges = []addrRange{hostRange(sub.prefix)}
		return sub, nil
	}
	for j, s := range p.Ranges {
		r, err := parseRange(s)
		if err != nil {
			return subnet{}, fmt.Errorf("ranges[%d]: %w", j, err)
		}
		if !sub.prefix.Contains(r.first) || !sub.prefix.Contains(r.last) {
			return subnet{}, fmt.Errorf("ranges[%d]: %q is not inside %s", j, s, sub.prefix)
		}
		sub.ranges = append(sub.ranges, r)
	}
	return sub, nil
}

// locate returns the subnet of the space whose ranges contain a.
func (s addressSpace) locate(a netip.Addr) (*subnet, bool) {
	for i, sub := range s {
		for _, r := range sub.ranges {
			if r.contains(a) {
				return &s[i], true
			}
		}
	}
	return nil, false
}

// next returns the first address, in allocation order, that is not taken, and its subnet.
// It steps over taken addresses one by one, so it costs at most one step per taken address.
func (s addressSpace) next(taken func(netip.Addr) bool) (netip.Addr, *subnet, bool) {
	for i, sub := range s {
		for _, r := range sub.ranges {
			for a := r.first; a.IsValid() && a.Compare(r.last) <= 0; a = a.Next() {
				if !taken(a) {
					return a, &s[i], true
				}
			}
		}
	}
	return netip.Addr{}, nil, false
}
