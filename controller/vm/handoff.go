package vm

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// handoffs holds a static IPAddress for the VM that last carried it until ReleaseGrace after
// it let go, before another VM may attach it. The reason is the one for ReleaseGrace: the
// releasing VM's next launcher pod may be created from a read of the VM taken before vmipam
// removed the address from its networks-spec, and would then carry it beside the new holder's
// pod (two guests, one address). Like releases, the record lives in memory: after a restart a
// handoff that a reconcile sees under way is not held (docs/RELIABILITY.md, "Release grace").
type handoffs struct {
	mu sync.Mutex
	// by maps an IPAddress (namespace/name) to the handoff under way.
	by map[types.NamespacedName]*handoff
}

// handoff is the record of one static IPAddress: which other VM carried it when last seen,
// and since when nothing but the asking VM carries it (zero while that VM still does).
type handoff struct {
	carrier  string
	released time.Time
}

// hold returns who holds the IPAddress ip for the VM vm, given the holder the ranking chose,
// the other VMs that carry it now (a VM name each) and whether vm carries it itself, and how
// long until the handoff is due (0 when it is not held back). A VM seen carrying ip keeps
// holding it for grace after it is first seen let go: until then the ranking's choice of vm is
// overridden by that VM. A vm that carries ip already is never held back: that would unplug a
// running guest's NIC.
func (h *handoffs) hold(ip types.NamespacedName, vm, holder string, others []string, carries bool, now time.Time, grace time.Duration) (string, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[types.NamespacedName]*handoff{}
	}
	if len(others) > 0 {
		carrier := others[0]
		if holder != vm {
			carrier = holder
		}
		h.by[ip] = &handoff{carrier: carrier}
		return holder, 0
	}
	rec := h.by[ip]
	if rec == nil || rec.carrier == vm || carries {
		delete(h.by, ip)
		return holder, 0
	}
	if rec.released.IsZero() {
		rec.released = now
	}
	if left := rec.released.Add(grace).Sub(now); left > 0 {
		return rec.carrier, left
	}
	delete(h.by, ip)
	return holder, 0
}
