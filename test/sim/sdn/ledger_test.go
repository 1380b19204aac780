package sdn

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestLedgerHoldMovesAddress(t *testing.T) {
	var l ledger
	pool := poolKey{Kind: "ClusterIPAddressPool", Name: "p"}
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	k, other := types.NamespacedName{Namespace: ns, Name: "k"}, types.NamespacedName{Namespace: ns, Name: "other"}
	now := time.Now()
	l.hold(k, holding{uid: "u", pool: pool, addr: a})
	l.hold(k, holding{uid: "u", pool: pool, addr: b})
	use := l.usage(pool, other, now)
	if use(a) != free || use(b) != held {
		t.Errorf("after moving k from %s to %s: usage(%s)=%v usage(%s)=%v, want free, held", a, b, a, use(a), b, use(b))
	}
	if l.usage(pool, k, now)(b) != free {
		t.Errorf("k's own address is reported in use for k")
	}
	l.drop(k, "someone-else")
	if l.usage(pool, other, now)(b) != held {
		t.Errorf("drop with another uid released k's address")
	}
	l.release(k, "u", now)
	if l.usage(pool, other, now)(b) != free || len(l.byPool[pool]) != 0 {
		t.Errorf("release without ttl left %v in the pool index, or a lease", l.byPool[pool])
	}
}

// TestLedgerLeaseKeepsTheAddressFromEveryone pins down that a released address of a pool with
// a leaseTTL is kept from every IPAddress, the one that held it included, until the lease's
// time, and that a lease never covers an address an IPAddress holds.
func TestLedgerLeaseKeepsTheAddressFromEveryone(t *testing.T) {
	var l ledger
	pool := poolKey{Kind: "ClusterIPAddressPool", Name: "p"}
	a := netip.MustParseAddr("10.0.0.1")
	k, other := types.NamespacedName{Namespace: ns, Name: "k"}, types.NamespacedName{Namespace: ns, Name: "other"}
	now := time.Now()
	l.hold(k, holding{uid: "u", pool: pool, addr: a, ttl: time.Minute})
	l.release(k, "u", now)
	for _, key := range []types.NamespacedName{k, other} {
		if got := l.usage(pool, key, now)(a); got != leased {
			t.Errorf("usage(%s) for %s right after the release = %v, want leased", a, key.Name, got)
		}
	}
	if got := l.usage(pool, other, now.Add(time.Minute))(a); got != free {
		t.Errorf("usage(%s) once the ttl has passed = %v, want free", a, got)
	}
	l.hold(other, holding{uid: "o", pool: pool, addr: a})
	l.lease(pool, a, now.Add(time.Hour))
	if got := l.usage(pool, other, now)(a); got != free {
		t.Errorf("a lease was laid over an address other holds: usage = %v for its holder", got)
	}
	l.forget(other)
	l.lease(pool, a, now.Add(time.Hour))
	l.unlease(pool, a)
	if got := l.usage(pool, k, now)(a); got != free {
		t.Errorf("usage after unlease = %v, want free", got)
	}
}

// TestSeedRecordsAllocationsMadeBeforeStart pins down that a new simulator (empty ledger) never
// hands out an address that an Allocated IPAddress already holds, in any namespace and network
// of the same pool, and that a pool's leaseTTL comes with the seeded holding.
func TestSeedRecordsAllocationsMadeBeforeStart(t *testing.T) {
	s, clk := newSim(t, nil, clusterNet("corp", "corp-pool"), clusterNet("corp-too", "corp-pool"),
		clusterPool("corp-pool", time.Minute, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.12")),
		ipAddr("old", "corp", allocatedTo("10.0.0.10", "10.0.0.0/24")),
		ipAddr("old-elsewhere", "corp-too", inNamespace("other"), allocatedTo("10.0.0.11", "10.0.0.0/24")),
		ipAddr("new", "corp"))
	_, got := reconcileIP(t, s, ns, "new")
	ok("10.0.0.12", "10.0.0.0/24").check(t, got)

	deleteIP(t, s, "old")
	pool := poolKey{Kind: "ClusterIPAddressPool", Name: "corp-pool"}
	if got := s.ledger.usage(pool, types.NamespacedName{Namespace: ns, Name: "new-comer"}, clk.Now())(netip.MustParseAddr("10.0.0.10")); got != leased {
		t.Errorf("10.0.0.10 of a deleted seeded IPAddress is %v, want leased for the pool's leaseTTL", got)
	}
}

// BenchmarkAllocate measures one Auto allocation in a pool that already holds 10,000
// addresses: it walks the pool from its start (one map lookup per address) and no longer lists
// the IPAddresses of the cluster.
func BenchmarkAllocate(b *testing.B) {
	const holdings = 10000
	s, _ := newSim(b, nil, clusterNet("corp", "corp-pool"), clusterPool("corp-pool", 0, subnetOf("10.0.0.0/8")))
	pool := poolKey{Kind: "ClusterIPAddressPool", Name: "corp-pool"}
	info, fail, err := s.resolve(context.Background(), ipAddr("x", "corp"))
	if fail != nil || err != nil {
		b.Fatal(fail, err)
	}
	s.ledger.seeded = true
	a := netip.MustParseAddr("10.0.0.1")
	for i := range holdings {
		s.ledger.hold(types.NamespacedName{Namespace: ns, Name: fmt.Sprint("held-", i)}, holding{uid: types.UID(fmt.Sprint(i)), pool: pool, addr: a})
		a = a.Next()
	}
	ip := ipAddr("new", "corp")
	b.ResetTimer()
	for b.Loop() {
		o, err := s.allocate(context.Background(), ip, info)
		if err != nil || !o.ok() {
			b.Fatal(o, err)
		}
	}
}
