package firstseen

import (
	"testing"
	"time"
)

func TestAtIsTheFirstTimeAnObjectWasAskedAbout(t *testing.T) {
	c := New(0)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := c.At("a", t0); !got.Equal(t0) {
		t.Fatalf("first At(a) = %v, want %v", got, t0)
	}
	if got := c.At("a", t0.Add(time.Minute)); !got.Equal(t0) {
		t.Fatalf("second At(a) = %v, want the first time %v", got, t0)
	}
	if got := c.At("b", t0.Add(time.Minute)); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("At(b) = %v, want its own first time", got)
	}
}

func TestTheLeastRecentlyAskedIsForgottenPastTheSize(t *testing.T) {
	c := New(2)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c.At("a", t0)
	c.At("b", t0)
	c.At("a", t0) // a is now the most recent
	c.At("c", t0)
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	if got := c.At("a", t0.Add(time.Hour)); !got.Equal(t0) {
		t.Fatalf("a was asked about recently and must be kept: At(a) = %v", got)
	}
	if got := c.At("b", t0.Add(time.Hour)); !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("b was the least recently asked and must be forgotten: At(b) = %v", got)
	}
}
