package scale

import (
	"fmt"
	"testing"
)

// minimal is a run of n VMs whose writes are exactly the minimum, with late answers
// IPAddresses SDN answered past UnansweredGrace.
func minimal(n, late int) result {
	pods := map[string]bool{}
	for i := range n {
		pods[fmt.Sprint(i)] = true
	}
	return result{N: n, LateAnswers: late, Writes: writeCount{
		OK: map[string]int{"create ipaddresses": 2 * n, "patch virtualmachines": n,
			"patch virtualmachines/status": n, "patch pods": n},
		Objects: map[string]map[string]bool{"pods": pods},
	}}
}

// TestCheckMinimum: a late SDN answer allows one more write of each patch kind (the skip,
// then the hotplug) and nothing else; without late answers any extra write fails the check.
func TestCheckMinimum(t *testing.T) {
	for _, c := range []struct {
		name  string
		late  int
		extra map[string]int
		fails int
	}{
		{"exact minimum", 0, nil, 0},
		{"extra networks-spec patch, no late answer", 0, map[string]int{"patch virtualmachines": 1}, 1},
		{"extra pod patch, no late answer", 0, map[string]int{"patch pods": 1}, 1},
		{"skip then hotplug of one late answer", 1, map[string]int{"patch virtualmachines": 1,
			"patch virtualmachines/status": 1, "patch pods": 1}, 0},
		{"two hotplugs for one late answer", 1, map[string]int{"patch virtualmachines": 2}, 1},
		{"an extra create is never allowed", 5, map[string]int{"create ipaddresses": 1}, 1},
		{"a missing status patch", 3, map[string]int{"patch virtualmachines/status": -1}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := minimal(10, c.late)
			for k, d := range c.extra {
				r.Writes.OK[k] += d
			}
			if got := r.checkMinimum(); len(got) != c.fails {
				t.Errorf("checkMinimum = %q, want %d failures", got, c.fails)
			}
		})
	}
}
