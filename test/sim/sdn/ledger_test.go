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
	l.hold(k, holding{uid: "u", pool: pool, addr: a})
	l.hold(k, holding{uid: "u", pool: pool, addr: b})
	taken := l.taken(pool, other, time.Now())
	if taken(a) || !taken(b) {
		t.Errorf("after moving k from %s to %s: taken(%s)=%v taken(%s)=%v, want false, true", a, b, a, taken(a), b, taken(b))
	}
	if l.taken(pool, k, time.Now())(b) {
		t.Errorf("k's own address is reported taken for k")
	}
	l.drop(k, "someone-else")
	if !l.taken(pool, other, time.Now())(b) {
		t.Errorf("drop with another uid released k's address")
	}
	l.release(k, "u", time.Now())
	if l.taken(pool, other, time.Now())(b) || len(l.byPool[pool]) != 0 {
		t.Errorf("release left %v in the pool index", l.byPool[pool])
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
	if a, leased := s.ledger.leased(poolKey{Kind: "ClusterIPAddressPool", Name: "corp-pool"}, types.NamespacedName{Namespace: ns, Name: "old"}, clk.Now()); !leased || a.String() != "10.0.0.10" {
		t.Errorf("deleting a seeded IPAddress leased %v (%v), want 10.0.0.10 for the pool's leaseTTL", a, leased)
	}
}

// BenchmarkAllocate measures one Auto allocation in a pool that already holds 10,000
// addresses: it walks the pool from its start (one map lookup per address) and no longer lists
// the IPAddresses of the cluster.
func BenchmarkAllocate(b *testing.B) {
	const held = 10000
	s, _ := newSim(b, nil, clusterNet("corp", "corp-pool"), clusterPool("corp-pool", 0, subnetOf("10.0.0.0/8")))
	pool := poolKey{Kind: "ClusterIPAddressPool", Name: "corp-pool"}
	info, fail, err := s.resolve(context.Background(), ipAddr("x", "corp"))
	if fail != nil || err != nil {
		b.Fatal(fail, err)
	}
	s.ledger.seeded = true
	a := netip.MustParseAddr("10.0.0.2")
	for i := range held {
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
