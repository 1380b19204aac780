package firstseen

import (
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// dated is an object of that UID the API server dated at created.
func dated(uid string, created time.Time) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)}
}

func TestAnObjectDatedBeforeNowIsItsCreationTimestampAndNotRemembered(t *testing.T) {
	c := New(0)
	if got := c.Created(dated("a", t0.Add(-time.Minute)), t0); !got.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("Created = %v, want the creationTimestamp", got)
	}
	if c.Len() != 0 {
		t.Fatalf("Len = %d: with clocks in agreement the Clock must stay empty", c.Len())
	}
}

func TestAnObjectDatedAheadIsCreatedWhenFirstSeenAlsoOnceNowPassedItsTimestamp(t *testing.T) {
	c := New(0)
	o := dated("a", t0.Add(2*time.Second)) // the API server runs 2 s ahead
	for _, now := range []time.Time{t0, t0.Add(time.Second), t0.Add(3 * time.Second), t0.Add(time.Hour)} {
		if got := c.Created(o, now); !got.Equal(t0) {
			t.Fatalf("Created at %v = %v, want when first seen, %v, also once now passed the timestamp", now, got, t0)
		}
	}
	if got := c.Created(dated("b", t0.Add(time.Hour)), t0.Add(time.Minute)); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("another object: Created = %v, want its own first sight", got)
	}
	late := dated("c", t0.Add(2*time.Second)) // first asked about after its timestamp passed
	if got := c.Created(late, t0.Add(3*time.Second)); !got.Equal(t0.Add(2*time.Second)) || c.Len() != 2 {
		t.Fatalf("first asked about past its timestamp: Created = %v, %d remembered; want the timestamp, and not remembered", got, c.Len())
	}
}

func TestTheLeastRecentlyAskedIsForgottenPastTheSize(t *testing.T) {
	c := New(2)
	ahead := t0.Add(time.Hour)
	c.Created(dated("a", ahead), t0)
	c.Created(dated("b", ahead), t0)
	c.Created(dated("a", ahead), t0) // a is now the most recent
	c.Created(dated("c", ahead), t0)
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	later := t0.Add(time.Minute)
	if got := c.Created(dated("a", ahead), later); !got.Equal(t0) {
		t.Fatalf("a was asked about recently and must be kept: Created = %v", got)
	}
	if got := c.Created(dated("b", ahead), later); !got.Equal(later) {
		t.Fatalf("b was the least recently asked and must be forgotten: Created = %v", got)
	}
}

func TestConcurrentCallersGetOneFirstSight(t *testing.T) {
	c := New(0)
	o := dated("a", t0.Add(time.Hour))
	var wg sync.WaitGroup
	got := make([]time.Time, 16)
	for i := range got {
		wg.Go(func() { got[i] = c.Created(o, t0.Add(time.Duration(i)*time.Millisecond)) })
	}
	wg.Wait()
	for _, g := range got {
		if !g.Equal(got[0]) {
			t.Fatalf("answers %v differ: one object has one first sight", got)
		}
	}
}
