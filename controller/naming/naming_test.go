package naming_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vmipam/vmipam/controller/naming"
)

func TestAutoIPAddressIsPlainWhenItFits(t *testing.T) {
	if got := naming.AutoIPAddress("web", "ClusterNetwork", "corp"); got != "web-cn-corp" {
		t.Errorf("got %q, want web-cn-corp", got)
	}
	if got := naming.AutoIPAddress("web", "Network", "lan"); got != "web-n-lan" {
		t.Errorf("got %q, want web-n-lan", got)
	}
}

func TestAutoIPAddressIsAValidLabelForAnyInput(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, tc := range [][3]string{
		{long, "ClusterNetwork", long},
		{"vm", "ClusterNetwork", "dotted.network.name"},
		{"vm", "Network", strings.Repeat("x.", 100)},
		{"-", "Network", "."},
	} {
		got := naming.AutoIPAddress(tc[0], tc[1], tc[2])
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("AutoIPAddress(%q…) = %q: %v", tc[0][:1], got, errs)
		}
	}
}

func TestAutoIPAddressDistinguishesTypesAndTruncatedNames(t *testing.T) {
	long := strings.Repeat("n", 100)
	a := naming.AutoIPAddress("vm", "Network", long+"1")
	b := naming.AutoIPAddress("vm", "Network", long+"2")
	c := naming.AutoIPAddress("vm", "ClusterNetwork", "x")
	d := naming.AutoIPAddress("vm", "Network", "x")
	if a == b || c == d {
		t.Errorf("collision: %q %q %q %q", a, b, c, d)
	}
	if a != naming.AutoIPAddress("vm", "Network", long+"1") {
		t.Error("not deterministic")
	}
}

func TestIfNameFitsIFNAMSIZ(t *testing.T) {
	for _, typ := range []string{"Network", "ClusterNetwork"} {
		got := naming.IfName(typ, strings.Repeat("z", 253))
		if len(got) > 15 || !strings.HasPrefix(got, "veth_") {
			t.Errorf("IfName(%s) = %q", typ, got)
		}
	}
	if naming.IfName("Network", "a") == naming.IfName("ClusterNetwork", "a") {
		t.Error("Network and ClusterNetwork of one name share an ifName")
	}
}
