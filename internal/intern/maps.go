package intern

import (
	"hash/maphash"
	"maps"
	"sync"
)

// A Go map costs far more than the strings in it: a label map of one to eight entries is a
// header and a group of eight slots, ~330 bytes however short its keys and values. Thousands
// of cached objects carry maps of identical content — the interface annotation of every Auto
// IPAddress on one network, the labels a template stamps on every VM of a fleet — so a Maps
// table keeps one map per distinct content and lets every object with that content point at
// it.
//
// A shared map is read-only: whoever holds one must never write into it. For a cache that
// holds because controller-runtime's cache hands Get and List a deep copy (ObjectMeta.DeepCopyInto
// copies both maps), and the readers that take the cache's own objects (event handlers and
// predicates, index functions, lists with client.UnsafeDisableDeepCopy) only read them; a
// transform must never write into a map it did not build (client-go may hand a transform an
// object it already transformed). Intact finds a map someone wrote into anyway.

// MaxSharedEntries bounds the maps worth sharing: a bigger one is hashed for nothing when, as
// a VM's full annotation set usually is, it is unique.
const MaxSharedEntries = 16

// Generation is how many distinct maps one generation of the table holds. The table
// keeps two generations, so it holds at most 2×Generation maps (under a megabyte of
// one-group maps) whatever churns through it, and a content seen again within a generation
// keeps its one copy; one that goes unseen for two generations is forgotten, and its next
// object starts a new copy — a second copy, never a wrong value.
const Generation = 2048

// Maps shares read-only maps by content, bounded as above. The zero value is not usable;
// see NewMaps.
type Maps struct {
	seed maphash.Seed

	mu       sync.Mutex
	current  map[uint64][]sharedMap // by content hash; collisions share a bucket
	previous map[uint64][]sharedMap
	size     int // maps in current
}

// sharedMap is a map the table handed out, with the content hash it was shared for.
type sharedMap struct {
	m    map[string]string
	hash uint64
}

// NewMaps returns an empty table.
func NewMaps() *Maps {
	return &Maps{seed: maphash.MakeSeed(), current: map[uint64][]sharedMap{}}
}

// Share returns the table's map with m's content, or m itself, which becomes the table's copy
// for later objects. m must be a map nobody else holds or writes (the caller built it);
// the caller must not write to the result. An empty or nil m, or one of more than
// MaxSharedEntries entries, is returned as it is.
func (t *Maps) Share(m map[string]string) map[string]string {
	if len(m) == 0 || len(m) > MaxSharedEntries {
		return m
	}
	h := t.hash(m)
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := find(t.current[h], m); s != nil {
		return s
	}
	if s := find(t.previous[h], m); s != nil {
		t.add(h, s) // seen again: it outlives the rotation
		return s
	}
	t.add(h, m)
	return m
}

// add puts m into the current generation, first rotating when it is full.
func (t *Maps) add(h uint64, m map[string]string) {
	if t.size >= Generation {
		t.previous, t.current, t.size = t.current, make(map[uint64][]sharedMap, len(t.current)), 0
	}
	t.current[h] = append(t.current[h], sharedMap{m: m, hash: h})
	t.size++
}

func find(bucket []sharedMap, m map[string]string) map[string]string {
	for _, s := range bucket {
		if maps.Equal(s.m, m) {
			return s.m
		}
	}
	return nil
}

// hash is a hash of m's content that does not depend on iteration order: the sum of its
// entries' hashes.
func (t *Maps) hash(m map[string]string) uint64 {
	var sum uint64
	var h maphash.Hash
	h.SetSeed(t.seed)
	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0) // "a"+"bc" and "ab"+"c" differ
		h.WriteString(v)
		sum += h.Sum64()
	}
	return sum
}

// Intact reports the first map the table holds whose content no longer has the hash it was
// shared for — one that something wrote into —, or nil.
func (t *Maps) Intact() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, gen := range []map[uint64][]sharedMap{t.current, t.previous} {
		for _, bucket := range gen {
			for _, s := range bucket {
				if t.hash(s.m) != s.hash {
					return s.m
				}
			}
		}
	}
	return nil
}
