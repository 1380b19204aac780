package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vmctrl "github.com/vmipam/vmipam/controller/vm"
)

// TestHotplugTimelineStages builds the timeline of one hotplug from an audit log and a
// controller log written here, with a failed write, another namespace's lines and the
// record's and pod's patches of an earlier skip that must not count.
func TestHotplugTimelineStages(t *testing.T) {
	dir := t.TempDir()
	h := &harness{t: t, dir: dir, audit: filepath.Join(dir, "audit.log")}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	audit := func(user, verb, resource, sub, ns, name string, code int, received, done time.Time) string {
		return fmt.Sprintf(`{"verb":%q,"user":{"username":%q},"objectRef":{"resource":%q,"subresource":%q,"namespace":%q,"name":%q},`+
			`"responseStatus":{"code":%d},"requestReceivedTimestamp":%q,"stageTimestamp":%q}`,
			verb, user, resource, sub, ns, name, code, received.Format(time.RFC3339Nano), done.Format(time.RFC3339Nano))
	}
	writeLines(t, h.audit,
		// The skip before SDN answered: the record's and the pod's patches of it are not the hotplug's.
		audit(controllerUser, "patch", "virtualmachineipams", "", hns, "hp-0", 200, at(-10), at(-9)),
		audit(standInUser, "patch", "pods", "", hns, "launcher-0", 200, at(-8), at(-7)),
		audit(standInUser, "patch", "ipaddresses", "status", hns, "ip-0", 409, at(-5), at(-4)), // a conflict: not the answer
		audit(standInUser, "patch", "ipaddresses", "status", hns, "ip-0", 200, at(-1), at(0)),
		audit(controllerUser, "patch", "virtualmachineipams", "", "elsewhere", "hp-0", 200, at(1), at(2)),
		audit(controllerUser, "patch", "virtualmachineipams", "", hns, "hp-0", 200, at(30), at(35)),
		audit(standInUser, "patch", "pods", "", hns, "launcher-0", 200, at(40), at(50)),
	)
	log := func(ms int, msg, extra string) string {
		return fmt.Sprintf(`{"ts":%q,"msg":%q%s}`, at(ms).Format(zapISO8601), msg, extra)
	}
	writeLines(t, h.controllerLog(),
		log(1, "Reconciling", fmt.Sprintf(`,"namespace":%q,"name":"hp-0"`, hns)), // before the answer: not the start
		log(5, vmctrl.AnsweredLog, fmt.Sprintf(`,"ipaddress":{"name":"ip-0","namespace":%q}`, hns)),
		log(20, "Reconciling", fmt.Sprintf(`,"namespace":%q,"name":"hp-0"`, hns)),
		"not json",
	)
	m := &hotplugMarks{ip: "ip-0", vm: "hp-0", pod: "launcher-0", observedTime: at(60)}
	tl := h.hotplugTimeline(hns, []*hotplugMarks{m}, 0, 0)
	want := map[string]time.Duration{stageDelivery: 5 * time.Millisecond, stageQueue: 15 * time.Millisecond,
		stageDecide: 10 * time.Millisecond, stagePod: 20 * time.Millisecond, stageObserve: 10 * time.Millisecond}
	for stage, d := range want {
		if got := tl.Stages[stage]; len(got) != 1 || got[0] != d {
			t.Errorf("stage %q = %v, want [%s]", stage, got, d)
		}
	}
	if tl.Reconciles != 2 {
		t.Errorf("reconciles of the hot-plugged VMs = %d, want 2", tl.Reconciles)
	}
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	must(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
}
