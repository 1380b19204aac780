package scale

import (
	"testing"
)

// minimal is a run of n VMs whose writes are exactly the minimum of the record design (two
// IPAddresses and one record per VM), with late answers IPAddresses SDN answered past
// UnansweredGrace.
func minimal(n, late int) result {
	return result{N: n, LateAnswers: late, Writes: writeCount{
		OK: map[string]int{"create ipaddresses": 2 * n, "create virtualmachineipams": n},
	}}
}

// TestCheckMinimum: a late SDN answer allows one more record patch (the skip, then the
// hotplug) and nothing else; without late answers any extra write fails the check, and any
// write of an object the virtualization controller owns fails it whatever the answers.
func TestCheckMinimum(t *testing.T) {
	for _, c := range []struct {
		name  string
		late  int
		extra map[string]int
		fails int
	}{
		{"exact minimum", 0, nil, 0},
		{"extra record patch, no late answer", 0, map[string]int{"patch virtualmachineipams": 1}, 1},
		{"hotplug of one late answer", 1, map[string]int{"patch virtualmachineipams": 1}, 0},
		{"two hotplugs for one late answer", 1, map[string]int{"patch virtualmachineipams": 2}, 1},
		{"an extra create is never allowed", 5, map[string]int{"create ipaddresses": 1}, 1},
		{"a missing record", 3, map[string]int{"create virtualmachineipams": -1}, 1},
		{"a VM annotation patch", 0, map[string]int{"patch virtualmachines": 1}, 1},
		{"a VM status update", 2, map[string]int{"update virtualmachines/status": 1}, 1},
		{"a pod patch", 0, map[string]int{"patch pods": 1}, 1},
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
