package vm

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ReleaseGrace is how long an Auto IPAddress that nothing names any more — neither the live
// VM's spec or networks-spec nor a launcher pod that has not finished (namedLive) — waits
// before it is deleted. The wait is measured from the first consistent read that found it
// unnamed, and the delete follows a second such read after the wait.
//
// Why: a launcher pod gets a copy of the VM's networks-spec taken when its creator last read
// the VM — KubeVirt's virt-controller from its informer cache, the VM-runtime stand-in from the
// read that began its reconcile (test/sim/vmruntime) — and no API precondition ties the pod's
// create to that read. A pod created a moment after vmipam removed a name from the VM's
// networks-spec can therefore still carry it, and appears only after the read that guarded
// the delete (seen in the chaos soak: a Restart's new pod named an address deleted under it).
// The grace lets such a pod appear before the delete; a creator whose copy is older than the
// grace is not covered (docs/RELIABILITY.md, "Limits"). Deleting later only holds the
// address a little longer: nobody else can be given it meanwhile.
const ReleaseGrace = 5 * time.Second

// releases records, per VM (namespace/name), since when each of its unwanted Auto IPAddresses (by UID) has
// been found unnamed by namedLive. Only VMs with a release under way have an entry: every
// execute that plans deletions replaces its VM's entry, and one that plans none drops it.
type releases struct {
	mu    sync.Mutex
	since map[types.NamespacedName]map[types.UID]time.Time
}

// due returns, of the unnamed IPAddresses (by UID) of the VM vm, those unnamed for at least
// grace at now, and how long until the next of the others is due (0 when none waits). The VM's
// record keeps only the IPAddresses of unnamed that are not due: one named again starts over.
func (r *releases) due(vm types.NamespacedName, unnamed []types.UID, now time.Time, grace time.Duration) (due []types.UID, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since = map[types.NamespacedName]map[types.UID]time.Time{}
	}
	seen, kept := r.since[vm], map[types.UID]time.Time{}
	for _, uid := range unnamed {
		first, ok := seen[uid]
		if !ok {
			first = now
		}
		if left := first.Add(grace).Sub(now); left > 0 {
			kept[uid] = first
			if wait == 0 || left < wait {
				wait = left
			}
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

// forget drops vm's record: it plans no deletion, or it is gone or being deleted (the garbage
// collector takes its IPAddresses).
func (r *releases) forget(vm types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.since, vm)
}
