package scale

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/controller/plan"
)

// minimal is a run of n VMs whose writes are exactly the minimum of the record design (two
// IPAddresses and one record per VM), with late answers IPAddresses vmipam could have
// reported pending before SDN answered them (lateAnswers).
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

// TestLateAnswersAreThoseVmipamCouldHaveSkipped: an answer counts as late (allowing a skip,
// then the attach) only when SDN was quiet on the address's network for UnansweredGrace
// before it, or it came after BacklogGrace — or when another address of its VM was reportable
// before it was answered (the record is then written with both pending); an answer in a
// backlog SDN kept working through does not.
func TestLateAnswersAreThoseVmipamCouldHaveSkipped(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	created := map[string]time.Time{"a/fast": t0, "a/queued": t0, "a/after-quiet": t0, "b/alone": t0,
		"a/past-backlog": t0, "a/sibling": t0}
	answered := map[string]time.Time{"a/fast": at(20 * time.Second), "a/queued": at(100 * time.Second),
		"b/alone": at(50 * time.Second), "a/past-backlog": at(plan.BacklogGrace + time.Minute),
		"a/sibling": at(60 * time.Second)} // in a's backlog, but b/alone, of the same VM, was reportable at 30 s
	for d := 5 * time.Second; d < 100*time.Second; d += 5 * time.Second { // SDN busy on a
		answered[fmt.Sprintf("a/other-%d", d/time.Second)] = at(d)
	}
	for d := 140 * time.Second; d <= plan.BacklogGrace; d += 5 * time.Second { // busy on a again
		answered[fmt.Sprintf("a/later-%d", d/time.Second)] = at(d)
	}
	answered["a/after-quiet"] = at(135 * time.Second) // after 35 s of quiet on a (100 s → 135 s)
	vmOf := map[string]string{"b/alone": "pair", "a/sibling": "pair"}
	of := func(key string) (string, string) {
		net, _, _ := strings.Cut(key, "/")
		if vm, ok := vmOf[key]; ok {
			return vm, net
		}
		return key, net // one VM per address
	}
	if got := countLate(created, answered, plan.UnansweredGrace, of); got != 4 {
		t.Errorf("late answers %d, want 4 (after-quiet, alone, its sibling, past-backlog)", got)
	}
}
