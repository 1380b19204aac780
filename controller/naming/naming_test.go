package naming_test

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vmipam/vmipam/controller/naming"
)

func TestAutoIPAddressIsReadableWithAHashSuffix(t *testing.T) {
	re := regexp.MustCompile(`^web-cn-corp-[a-z2-7]{6}$`)
	if got := naming.AutoIPAddress("web", "ClusterNetwork", "corp"); !re.MatchString(got) {
		t.Errorf("got %q, want %s", got, re)
	}
}

func TestAutoIPAddressNamesThatReadAlikeDoNotCollide(t *testing.T) {
	a := naming.AutoIPAddress("a", "ClusterNetwork", "x-cn-corp")
	b := naming.AutoIPAddress("a-cn-x", "ClusterNetwork", "corp")
	if a == b {
		t.Errorf("both are %q", a)
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

// Every Auto IPAddress name has the shape MayBeAutoIPAddress looks for (a false answer must be
// certain: the indexes leave own Auto names out on its word), and many static names do not
// (a name ending in a six-letter word, "web-static", does: it only costs a scan).
func TestMayBeAutoIPAddressAcceptsEveryAutoName(t *testing.T) {
	long := strings.Repeat("a", 253)
	for _, tc := range [][3]string{
		{"web", "ClusterNetwork", "corp"}, {long, "ClusterNetwork", long}, {"-", "Network", "."},
		{"vm.with.dots", "Network", "x.y"}, {"VM", "Network", "Upper"},
	} {
		if got := naming.AutoIPAddress(tc[0], tc[1], tc[2]); !naming.MayBeAutoIPAddress(got) {
			t.Errorf("MayBeAutoIPAddress(%q) = false for the Auto name of %q on %s %q", got, tc[0], tc[1], tc[2])
		}
	}
	for _, name := range []string{"web-static-1", "db-10-0-0-5", "ip-abc", "corp-abcdef1", "-abcde", "x-abc-ef", "a-ABCDEF", "a-abcde8"} {
		if naming.MayBeAutoIPAddress(name) {
			t.Errorf("MayBeAutoIPAddress(%q) = true, want false", name)
		}
	}
}
