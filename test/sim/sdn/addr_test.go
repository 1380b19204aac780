package sdn

import (
	"net/netip"
	"slices"
	"testing"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		name, in    string
		first, last string
		wantErr     bool
	}{
		{name: "inclusive IPv4 range", in: "10.0.0.10-10.0.0.20", first: "10.0.0.10", last: "10.0.0.20"},
		{name: "spaces around the dash are allowed", in: "10.0.0.10 - 10.0.0.10", first: "10.0.0.10", last: "10.0.0.10"},
		{name: "IPv6 range", in: "fd00::5-fd00::9", first: "fd00::5", last: "fd00::9"},
		{name: "missing dash is an error", in: "10.0.0.10", wantErr: true},
		{name: "bad address is an error", in: "10.0.0.300-10.0.0.4", wantErr: true},
		{name: "reversed range is an error", in: "10.0.0.9-10.0.0.4", wantErr: true},
		{name: "mixed families are an error", in: "10.0.0.1-fd00::1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parseRange(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseRange(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if r.first.String() != tt.first || r.last.String() != tt.last {
				t.Errorf("parseRange(%q) = %s-%s, want %s-%s", tt.in, r.first, r.last, tt.first, tt.last)
			}
		})
	}
}

func TestHostRange(t *testing.T) {
	tests := []struct {
		name, prefix string
		first, last  string
	}{
		{name: "IPv4 /24: all but the network and broadcast addresses, the first host included", prefix: "10.0.0.0/24", first: "10.0.0.1", last: "10.0.0.254"},
		{name: "unmasked prefix is masked first", prefix: "10.0.0.77/24", first: "10.0.0.1", last: "10.0.0.254"},
		{name: "IPv4 /29 leaves six", prefix: "192.168.1.8/29", first: "192.168.1.9", last: "192.168.1.14"},
		{name: "IPv4 /30 leaves two", prefix: "10.0.0.0/30", first: "10.0.0.1", last: "10.0.0.2"},
		{name: "IPv4 /31 gives both addresses (RFC 3021)", prefix: "10.0.0.0/31", first: "10.0.0.0", last: "10.0.0.1"},
		{name: "IPv4 /32 gives its one address", prefix: "10.0.0.1/32", first: "10.0.0.1", last: "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := hostRange(netip.MustParsePrefix(tt.prefix))
			if r.first.String() != tt.first || r.last.String() != tt.last {
				t.Errorf("hostRange(%s) = %s-%s, want %s-%s", tt.prefix, r.first, r.last, tt.first, tt.last)
			}
		})
	}
}

func TestParseSpace(t *testing.T) {
	tests := []struct {
		name    string
		pools   []sdnv1.Subnet
		want    []string // "prefix first-last" per range, in order
		wantErr bool
	}{
		{
			name:  "subnet without ranges allocates its host addresses",
			pools: []sdnv1.Subnet{{Network: "10.0.0.0/24"}},
			want:  []string{"10.0.0.0/24 10.0.0.1-10.0.0.254"},
		},
		{
			name: "ranges restrict allocation, in order, across subnets",
			pools: []sdnv1.Subnet{
				{Network: "10.0.0.0/24", Ranges: []string{"10.0.0.50-10.0.0.51", "10.0.0.10-10.0.0.10"}},
				{Network: "10.1.0.0/16"},
			},
			want: []string{
				"10.0.0.0/24 10.0.0.50-10.0.0.51", "10.0.0.0/24 10.0.0.10-10.0.0.10",
				"10.1.0.0/16 10.1.0.1-10.1.255.254",
			},
		},
		{name: "range outside its subnet is an error", pools: []sdnv1.Subnet{{Network: "10.0.0.0/24", Ranges: []string{"10.0.1.1-10.0.1.2"}}}, wantErr: true},
		{name: "bad CIDR is an error", pools: []sdnv1.Subnet{{Network: "10.0.0.0/33"}}, wantErr: true},
		{name: "an IPv6 subnet is an error: SDN is IPv4-only", pools: []sdnv1.Subnet{{Network: "fd00::/64"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			space, err := parseSpace(tt.pools)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseSpace() error = %v, wantErr %v", err, tt.wantErr)
			}
			var got []string
			for _, sub := range space {
				for _, r := range sub.ranges {
					got = append(got, sub.prefix.String()+" "+r.first.String()+"-"+r.last.String())
				}
			}
			if !tt.wantErr && !slices.Equal(got, tt.want) {
				t.Errorf("parseSpace() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAddressSpaceNext(t *testing.T) {
	space, err := parseSpace([]sdnv1.Subnet{
		{Network: "10.0.0.0/24", Ranges: []string{"10.0.0.10-10.0.0.11"}},
		{Network: "10.0.1.0/24", Ranges: []string{"10.0.1.5-10.0.1.5"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		taken      []string
		want, cidr string
	}{
		{name: "lowest address of the first range first", want: "10.0.0.10", cidr: "10.0.0.0/24"},
		{name: "skips taken addresses", taken: []string{"10.0.0.10"}, want: "10.0.0.11", cidr: "10.0.0.0/24"},
		{name: "moves on to the next subnet", taken: []string{"10.0.0.10", "10.0.0.11"}, want: "10.0.1.5", cidr: "10.0.1.0/24"},
		{name: "exhausted space yields nothing", taken: []string{"10.0.0.10", "10.0.0.11", "10.0.1.5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			taken := map[netip.Addr]bool{}
			for _, a := range tt.taken {
				taken[netip.MustParseAddr(a)] = true
			}
			a, p, ok := space.next(func(a netip.Addr) bool { return taken[a] })
			if ok != (tt.want != "") {
				t.Fatalf("next() ok = %v, want %v", ok, tt.want != "")
			}
			if ok && (a.String() != tt.want || p.prefix.String() != tt.cidr) {
				t.Errorf("next() = %s in %s, want %s in %s", a, p.prefix, tt.want, tt.cidr)
			}
		})
	}
}

func TestAddressSpaceLocate(t *testing.T) {
	space, err := parseSpace([]sdnv1.Subnet{{Network: "10.0.0.0/24", Ranges: []string{"10.0.0.10-10.0.0.20"}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, addr string
		want       bool
	}{
		{name: "inside a range", addr: "10.0.0.15", want: true},
		{name: "range bounds are inclusive", addr: "10.0.0.20", want: true},
		{name: "inside the subnet but outside the ranges", addr: "10.0.0.21"},
		{name: "outside the subnet", addr: "10.0.1.15"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := space.locate(netip.MustParseAddr(tt.addr)); ok != tt.want {
				t.Errorf("locate(%s) = %v, want %v", tt.addr, ok, tt.want)
			}
		})
	}
}
