package mac

import (
	"regexp"
	"testing"
)

func TestNIC(t *testing.T) {
	format := regexp.MustCompile(`^02(:[0-9a-f]{2}){5}$`)
	a := NIC("ns", "vm", "ClusterNetwork", "corp", 0)
	if !format.MatchString(a) {
		t.Fatalf("NIC() = %q, want 02:xx:xx:xx:xx:xx", a)
	}
	if again := NIC("ns", "vm", "ClusterNetwork", "corp", 0); again != a {
		t.Errorf("NIC() not stable: %q then %q", a, again)
	}
	for _, other := range []string{
		NIC("ns", "vm", "ClusterNetwork", "corp", 1),
		NIC("ns", "vm", "Network", "corp", 0),
		NIC("ns", "vm2", "ClusterNetwork", "corp", 0),
		NIC("ns2", "vm", "ClusterNetwork", "corp", 0),
	} {
		if other == a {
			t.Errorf("different NICs share MAC %q", a)
		}
	}
}
