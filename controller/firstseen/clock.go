package firstseen

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
)

// DefaultSize is how many objects a Clock remembers at most: objects created while the API
// server's clock runs ahead of the controller's and still waiting out a grace. Past it the
// least recently asked is forgotten, and its grace starts again when it is next asked about.
const DefaultSize = 1 << 16

// Clock remembers, per object UID, the first time it was asked about the object. Create it with
// New; it is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex // makes At's look-up and insertion one step
	seen *lru.Cache // UID → time.Time
}

// New returns a Clock that remembers at most size objects (DefaultSize when size ≤ 0).
func New(size int) *Clock {
	if size <= 0 {
		size = DefaultSize
	}
	return &Clock{seen: lru.New(size)}
}

// At returns when uid was first asked about, and records now as that time on the first call.
// now is the caller's clock; the same caller's clock must be passed every time.
func (c *Clock) At(uid types.UID, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.seen.Get(uid); ok {
		return t.(time.Time)
	}
	c.seen.Add(uid, now)
	return now
}

// Len is how many objects the Clock remembers.
func (c *Clock) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen.Len()
}
