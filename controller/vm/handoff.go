package vm

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// handoffs holds a static IPAddress for the VM that let go of it until ReleaseGrace after
// the write of that VM's networks-spec that dropped it; meanwhile no other VM attaches it. The
// reason is the one for ReleaseGrace: the VM's next launcher pod may be created from a read of
// the VM taken before that write, and would then carry the address beside the new holder's pod
// (two guests, one address). The wait is timed from the releasing VM's own write, so it holds
// whoever asks — a VM that waited for the address, or one created a moment later. Like
// releases, the record lives in memory: after a restart or a leader change a handoff already
// under way is not held back (docs/RELIABILITY.md, "Release grace").
type handoffs struct {
	mu sync.Mutex
	// by maps an IPAddress (namespace/name) to the VM that let go of it and when.
	by map[types.NamespacedName]handoff
}

// handoff is the record of one IPAddress let go: by which VM, and when its VM's networks-spec
// without it was written.
type handoff struct {
	vm string
	at time.Time
}

// letGo records that vm's networks-spec, written at now, no longer carries the IPAddresses
// names in namespace, and drops the records older than grace.
func (h *handoffs) letGo(namespace, vm string, names []string, now time.Time, grace time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[types.NamespacedName]handoff{}
	}
	for ip, rec := range h.by {
		if !now.Before(rec.at.Add(grace)) {
			delete(h.by, ip)
		}
	}
	for _, name := range names {
		h.by[types.NamespacedName{Namespace: namespace, Name: name}] = handoff{vm: vm, at: now}
	}
}

// hold returns who holds the IPAddress ip for the VM vm, given the holder the ranking chose
// and whether vm carries ip itself, and how long until the handoff is due (0 when nothing is
// held back). While another VM's letting go of ip is younger than grace, that VM holds it
// against vm. A vm that carries ip already is never held back: that would unplug a running
// guest's NIC; nor is a ranking that chose another VM changed.
func (h *handoffs) hold(ip types.NamespacedName, vm, holder string, carries bool, now time.Time, grace time.Duration) (string, time.Duration) {
	if carries || holder != vm {
		return holder, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rec, ok := h.by[ip]
	if !ok || rec.vm == vm {
		return holder, 0
	}
	left := rec.at.Add(grace).Sub(now)
	if left <= 0 {
		delete(h.by, ip)
		return holder, 0
	}
	return rec.vm, left
}
