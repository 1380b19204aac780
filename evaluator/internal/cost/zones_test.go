package cost

import (
	"fmt"
	"testing"
	"time"
)

// A name is loaded once: what it gave, zone or error, answers every later check, so a file
// that is no zone is not read again on each call (issue #15, tester atk17: tzdata.zi, 114 KB,
// read 1,500 times per interface). The results kept stay within maxZoneNames, and a name too
// long to be a zone is refused unread.
func TestZoneChecksLoadANameOnce(t *testing.T) {
	loads := map[string]int{}
	z := &zoneChecks{results: map[string]error{}, load: func(name string) (*time.Location, error) {
		loads[name]++
		return time.LoadLocation(name)
	}}
	for range 500 {
		if err := z.check("tzdata.zi"); err == nil || err.Error() != `"tzdata.zi" is not a time zone` {
			t.Fatalf("check(tzdata.zi) = %v, want it is not a time zone", err)
		}
		if err := z.check("Europe/Berlin"); err != nil {
			t.Fatalf("check(Europe/Berlin) = %v, want a zone", err)
		}
	}
	if loads["tzdata.zi"] != 1 || loads["Europe/Berlin"] != 1 {
		t.Errorf("loads = %v, want each name loaded once", loads)
	}
	for i := range 2 * maxZoneNames {
		_ = z.check(fmt.Sprintf("Nowhere/%d", i))
	}
	if n := len(z.results); n > maxZoneNames {
		t.Errorf("%d results kept, at most %d", n, maxZoneNames)
	}
	long := fmt.Sprintf("%0*d", maxZoneName+1, 0)
	if err := z.check(long); err == nil || loads[long] != 0 {
		t.Errorf("check(%d bytes) = %v after %d loads, want refused unread", len(long), err, loads[long])
	}
}
