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
	// by maps an IPAddress (namespace/name) to the VMs that let go of it, each with the time
	// of its write: two VMs may let go of one address in one grace (a copy and the holder).
	by map[types.NamespacedName]map[string]time.Time
	// swept is when records older than the grace were last dropped: at most once a grace, so
	// that a burst of releases costs linear time.
	swept time.Time
}

// letGo records that vm's networks-spec, written at now, no longer carries the IPAddresses
// names in namespace, and drops the records older than grace once a grace.
func (h *handoffs) letGo(namespace, vm string, names []string, now time.Time, grace time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[types.NamespacedName]map[string]time.Time{}
	}
	if now.Sub(h.swept) >= grace {
		h.sweep(now, grace)
	}
	for _, name := range names {
		ip := types.NamespacedName{Namespace: namespace, Name: name}
		if h.by[ip] == nil {
			h.by[ip] = map[string]time.Time{}
		}
		h.by[ip][vm] = now
	}
}

// sweep drops the records older than grace; h.mu is held.
func (h *handoffs) sweep(now time.Time, grace time.Duration) {
	for ip, vms := range h.by {
		for vm, at := range vms {
			if !now.Before(at.Add(grace)) {
				delete(vms, vm)
			}
		}
		if len(vms) == 0 {
			delete(h.by, ip)
		}
	}
	h.swept = now
}

// hold returns who holds the IPAddress ip for the VM vm, given the holder the ranking chose
// and whether a launcher pod of vm carries ip, and how long until the handoff is due (0 when
// nothing is held back). While another VM's letting go of ip is younger than grace, that VM
// (the latest to let go) holds it against vm. A vm whose pod carries ip already is never held
// back: that would unplug a running guest's NIC; nor is a ranking that chose another VM
// changed. A vm that carries ip only in its own networks-spec annotation — which a copied
// manifest brings along — is held like any other.
func (h *handoffs) hold(ip types.NamespacedName, vm, holder string, podCarries bool, now time.Time, grace time.Duration) (string, time.Duration) {
	if podCarries || holder != vm {
		return holder, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	by, wait := holder, time.Duration(0)
	for other, at := range h.by[ip] {
		left := at.Add(grace).Sub(now)
		if other == vm || left <= 0 {
			continue
		}
		if left > wait || left == wait && other < by {
			by, wait = other, left
		}
	}
	return by, wait
}
