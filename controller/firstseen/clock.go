package firstseen

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"
)

// DefaultSize is how many objects a Clock remembers at most: objects the API server dated
// after the controller's clock, still waiting out a grace. Past it the least recently asked is
// forgotten: asked about again before its timestamp, its grace starts again; after it, the
// grace runs from the timestamp.
const DefaultSize = 1 << 16

// Clock remembers when its caller first saw the objects the API server dated after the
// caller's clock. Create it with New; it is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex // makes Created's look-up and insertion one step
	seen *lru.Cache // UID → time.Time, on the caller's clock
}

// New returns a Clock that remembers at most size objects (DefaultSize when size ≤ 0).
func New(size int) *Clock {
	if size <= 0 {
		size = DefaultSize
	}
	return &Clock{seen: lru.New(size)}
}

// Created is when obj was created, on the clock now comes from (the same clock every call):
//   - an object the Clock remembers: when it first saw it — which is before the object's
//     creationTimestamp, so that a skew smaller than a grace stops counting once now passes
//     the timestamp as well;
//   - otherwise, one dated after now — only a clock running ahead of the caller's can do that
//     —: now, which the Clock remembers;
//   - otherwise its creationTimestamp (the API server's clock; with clocks in agreement, this
//     is every object, and the Clock stays empty). An object first asked about once now has
//     passed its timestamp is dated by the timestamp: its grace runs late by up to the skew,
//     as nothing saw it earlier.
func (c *Clock) Created(obj metav1.Object, now time.Time) time.Time {
	created := obj.GetCreationTimestamp().Time
	c.mu.Lock()
	defer c.mu.Unlock()
	if seen, ok := c.seen.Get(obj.GetUID()); ok {
		return seen.(time.Time) // remembered only while before the timestamp: the earlier
	}
	if !created.After(now) {
		return created
	}
	c.seen.Add(obj.GetUID(), now)
	return now
}

// Len is how many objects the Clock remembers.
func (c *Clock) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen.Len()
}
