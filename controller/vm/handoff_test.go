package vm

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestAStaticIPAddressIsHandedOverReleaseGraceAfterItsCarrierLetGo: VM b waits for ip-s, which
// VM a carries. Once a lets go, b gets it only a grace later; a seen carrying it again (its pod
// made from an older read of a) starts the wait over; a VM carrying it itself is never held
// back; and with no carrier ever seen nothing is held back.
func TestAStaticIPAddressIsHandedOverReleaseGraceAfterItsCarrierLetGo(t *testing.T) {
	var h handoffs
	ip := types.NamespacedName{Namespace: "ns", Name: "ip-s"}
	t0 := time.Now()
	const grace = 5 * time.Second
	steps := []struct {
		what     string
		at       time.Duration
		vm       string
		ranked   string
		others   []string
		carries  bool
		want     string
		wantWait time.Duration
	}{
		{"a carries it", 0, "b", "a", []string{"a"}, false, "a", 0},
		{"a let go", time.Second, "b", "b", nil, false, "a", grace},
		{"half the grace", time.Second + grace/2, "b", "b", nil, false, "a", grace / 2},
		{"a's late pod carries it", 2*time.Second + grace/2, "b", "a", []string{"a"}, false, "a", 0},
		{"a let go again", 3*time.Second + grace/2, "b", "b", nil, false, "a", grace},
		{"the grace is over", 3*time.Second + grace/2 + grace, "b", "b", nil, false, "b", 0},
		{"b holds, no record", 4*time.Second + 2*grace, "b", "b", nil, true, "b", 0},
		{"b and a carry it", 5*time.Second + 2*grace, "b", "b", []string{"a"}, true, "b", 0},
		{"a let go, b carries it", 6*time.Second + 2*grace, "b", "b", nil, true, "b", 0},
		{"c asks, nobody ever carried it here", 7*time.Second + 2*grace, "c", "c", nil, false, "c", 0},
	}
	for _, st := range steps {
		got, wait := h.hold(ip, st.vm, st.ranked, st.others, st.carries, t0.Add(st.at), grace)
		if got != st.want || wait != st.wantWait {
			t.Errorf("%s: held by %q, wait %v; want %q, %v", st.what, got, wait, st.want, st.wantWait)
		}
	}
	if len(h.by) != 0 {
		t.Errorf("handed over, yet recorded: %v", h.by)
	}
}
