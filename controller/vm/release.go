package vm

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ReleaseGrace is how long an Auto IPAddress that no interface wants any more waits before it
// is deleted. The wait starts at the first reconcile that plans its deletion (the cache shows
// nothing naming it), and the delete follows only if a consistent read after the wait finds
// nothing naming it either — neither the live VM's spec or networks-spec nor a launcher pod
// that has not finished (namedLive); one found named starts the wait over.
//
// Why: a launcher pod gets a copy of the VM's networks-spec taken when its creator last read
// the VM — KubeVirt's virt-controller from its informer cache, the VM-runtime stand-in from the
// read that began its reconcile (test/sim/vmruntime) — and no API precondition ties the pod's
// create to that read. A pod created a moment after vmipam removed a name from the VM's
// networks-spec can therefore still carry it, and appears only after the read that guarded
// the delete (seen in the chaos soak: a Restart's new pod named an address deleted under it).
// The grace lets such a pod appear before the delete; a creator whose copy is older than the
// grace is not covered (docs/RELIABILITY.md, "Release grace"). Deleting later only holds the
// address a little longer: nobody else can be given it meanwhile.
const ReleaseGrace = 5 * time.Second

// releases records, per VM (namespace/name), since when each of its unwanted Auto
// IPAddresses (by UID) has been a candidate for deletion. Only VMs with a release under way
// have an entry: every execute that plans deletions replaces its VM's entry, and one that
// plans none drops it.
type releases struct {
	mu    sync.Mutex
	since map[types.NamespacedName]map[types.UID]time.Time
}

// due returns, of the candidates (IPAddress UIDs) of the VM vm, those that have been
// candidates for at least grace at now, and how long until the next of the others is due (0
// when none waits). The VM's record keeps only the candidates that are not due: one that
// stopped being a candidate (wanted or named again) starts over when it is one again.
func (r *releases) due(vm types.NamespacedName, candidates []types.UID, now time.Time, grace time.Duration) (due []types.UID, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since = map[types.NamespacedName]map[types.UID]time.Time{}
	}
	seen, kept := r.since[vm], map[types.UID]time.Time{}
	for _, uid := range candidates {
		first, ok := seen[uid]
		if !ok {
			first = now
		}
		if left := first.Add(grace).Sub(now); left > 0 {
			kept[uid] = first
			wait = soonest(wait, left)
			continue
		}
		due = append(due, uid)
	}
	if len(kept) == 0 {
		delete(r.since, vm)
	} else {
		r.since[vm] = kept
	}
	return due, wait
}

// startOver restarts the wait of vm's IPAddress uid at now: a consistent read found it named.
func (r *releases) startOver(vm types.NamespacedName, uid types.UID, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since = map[types.NamespacedName]map[types.UID]time.Time{}
	}
	if r.since[vm] == nil {
		r.since[vm] = map[types.UID]time.Time{}
	}
	r.since[vm][uid] = now
}

// forget drops vm's record: it plans no deletion, or it is gone or being deleted (the garbage
// collector takes its IPAddresses).
func (r *releases) forget(vm types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.since, vm)
}
