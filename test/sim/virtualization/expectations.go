package virtualization

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultExpectationTTL is how long a pod the stand-in created (deleted) counts as present
// (gone) while the cache does not show it yet, unless Simulator.ExpectationTTL says otherwise.
// The cache normally catches up within milliseconds; the TTL only bounds the case where the
// pod's creation and deletion both happened out of sight.
const DefaultExpectationTTL = 10 * time.Second

// expectation is a pod the stand-in created or deleted, and when.
type expectation struct {
	pod corev1.Pod
	at  time.Time
}

// expectations remembers, per VM and by pod name, the launcher pods the stand-in created or deleted that its
// cache may not show yet — as KubeVirt's controllers keep expectations — so reading pods from
// the cache never creates a second pod or brings back a deleted one. Its zero value is ready to
// use; it is safe for concurrent use.
type expectations struct {
	// ttl is how long an expectation holds; DefaultExpectationTTL when 0.
	ttl     time.Duration
	mu      sync.Mutex
	created map[types.NamespacedName]map[string]expectation
	deleted map[types.NamespacedName]map[string]expectation
}

// expectCreated records that pod, a launcher of VM vm, was created at now.
func (e *expectations) expectCreated(vm types.NamespacedName, pod corev1.Pod, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.created = record(e.created, vm, pod, now)
}

// expectDeleted records that pod, a launcher of VM vm, was deleted at now.
func (e *expectations) expectDeleted(vm types.NamespacedName, pod corev1.Pod, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deleted = record(e.deleted, vm, pod, now)
	delete(e.created[vm], pod.Name)
}

// record adds pod to m[vm], creating the maps as needed, and returns m.
func record(m map[types.NamespacedName]map[string]expectation, vm types.NamespacedName, pod corev1.Pod, now time.Time) map[types.NamespacedName]map[string]expectation {
	if m == nil {
		m = map[types.NamespacedName]map[string]expectation{}
	}
	if m[vm] == nil {
		m[vm] = map[string]expectation{}
	}
	m[vm][pod.Name] = expectation{pod: pod, at: now}
	return m
}

// apply returns cached, the launcher pods of vm as the cache shows them, corrected by the
// expectations: created pods the cache lacks are added, deleted pods it still shows are left
// out. Expectations the cache has caught up with, or older than expectationTTL, are forgotten.
func (e *expectations) apply(vm types.NamespacedName, cached []corev1.Pod, now time.Time) []corev1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	expectationTTL := e.lifetime()
	inCache := make(map[string]types.UID, len(cached))
	for _, p := range cached {
		inCache[p.Name] = p.UID
	}
	out := make([]corev1.Pod, 0, len(cached)+len(e.created[vm]))
	for _, p := range cached {
		if x, gone := e.deleted[vm][p.Name]; !gone || x.pod.UID != p.UID {
			out = append(out, p)
		}
	}
	for name, x := range e.created[vm] {
		if _, seen := inCache[name]; !seen && now.Sub(x.at) < expectationTTL {
			out = append(out, x.pod)
		} else {
			delete(e.created[vm], name)
		}
	}
	for name, x := range e.deleted[vm] {
		if uid, seen := inCache[name]; !seen || uid != x.pod.UID || now.Sub(x.at) >= expectationTTL {
			delete(e.deleted[vm], name)
		}
	}
	forgetEmpty(e.created, vm)
	forgetEmpty(e.deleted, vm)
	return out
}

// forgetEmpty drops m[vm] when it holds nothing, so memory follows the VMs in flight.
func forgetEmpty(m map[types.NamespacedName]map[string]expectation, vm types.NamespacedName) {
	if len(m[vm]) == 0 {
		delete(m, vm)
	}
}

// lifetime is ttl, or DefaultExpectationTTL when ttl is 0.
func (e *expectations) lifetime() time.Duration {
	if e.ttl == 0 {
		return DefaultExpectationTTL
	}
	return e.ttl
}

// left returns how long the longest-lived expectation of vm still holds at now, 0 when it has
// none: the VM must be looked at again by then, when the cache has caught up or the expectation
// lapsed, since no event may come (a pod created and deleted out of the cache's sight).
func (e *expectations) left(vm types.NamespacedName, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out time.Duration
	for _, m := range []map[types.NamespacedName]map[string]expectation{e.created, e.deleted} {
		for _, x := range m[vm] {
			out = max(out, e.lifetime()-now.Sub(x.at))
		}
	}
	return out
}
