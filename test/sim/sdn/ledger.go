package sdn

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// poolKey identifies an address pool. Namespace is empty for a ClusterIPAddressPool.
type poolKey struct {
	Kind, Namespace, Name string
}

// holding is an address the simulator handed out (or saw handed out) to one IPAddress object.
type holding struct {
	uid  types.UID
	pool poolKey
	addr netip.Addr
	ttl  time.Duration // the pool's leaseTTL when the address was handed out
}

// usage says whether an address of a pool may be handed out, and if not, why.
type usage int

// Usages of an address.
const (
	free   usage = iota
	held         // an IPAddress holds it
	leased       // an orphaned IPAddressLease keeps it until it expires
)

// ledger is the simulator's memory of handed-out and leased addresses: the allocation state
// SDN keeps, so choosing an address costs a lookup per address tried instead of a scan of every
// IPAddress in the cluster. It mirrors the IPAddresses' statuses and the IPAddressLease objects:
// it is filled from the cache once (seeded) and then kept by the simulator's own reservations,
// releases and lease changes; the cache can lag behind the simulator's writes, the ledger
// cannot. Its zero value is ready to use; callers serialize access.
type ledger struct {
	holdings map[types.NamespacedName]holding
	// byPool indexes holdings by pool and address: which IPAddress holds an address.
	byPool map[poolKey]map[netip.Addr]types.NamespacedName
	// leases are the addresses orphaned leases keep, by pool, until the time given: from
	// everyone, the IPAddress that last held the address included (SDN keeps the address, not
	// a name).
	leases map[poolKey]map[netip.Addr]time.Time
	// seeded is true once every Allocated IPAddress and every lease of the cache has been
	// recorded.
	seeded bool
}

// hold records that key holds h.addr. An orphaned lease of the address ends: the address is
// held again (only the simulator hands it out, after the lease expired or was deleted).
func (l *ledger) hold(key types.NamespacedName, h holding) {
	l.forget(key)
	if l.holdings == nil {
		l.holdings = map[types.NamespacedName]holding{}
		l.byPool = map[poolKey]map[netip.Addr]types.NamespacedName{}
	}
	l.holdings[key] = h
	if l.byPool[h.pool] == nil {
		l.byPool[h.pool] = map[netip.Addr]types.NamespacedName{}
	}
	l.byPool[h.pool][h.addr] = key
	delete(l.leases[h.pool], h.addr)
}

// forget removes key's holding, if any, from holdings and the pool index.
func (l *ledger) forget(key types.NamespacedName) {
	h, ok := l.holdings[key]
	if !ok {
		return
	}
	delete(l.holdings, key)
	if l.byPool[h.pool][h.addr] == key {
		delete(l.byPool[h.pool], h.addr)
	}
}

// drop forgets key's holding of uid without a lease: a reservation whose status write failed.
func (l *ledger) drop(key types.NamespacedName, uid types.UID) {
	if h, ok := l.holdings[key]; ok && h.uid == uid {
		l.forget(key)
	}
}

// release forgets key's holding when it belongs to uid (any uid when empty): its IPAddress is
// gone. When the pool has a leaseTTL, the address stays leased until now+ttl (the lease object
// is orphaned by the lease controller, which may correct the time to its orphaningTimestamp).
func (l *ledger) release(key types.NamespacedName, uid types.UID, now time.Time) {
	h, ok := l.holdings[key]
	if !ok || (uid != "" && h.uid != uid) {
		return
	}
	l.forget(key)
	if h.ttl > 0 {
		l.lease(h.pool, h.addr, now.Add(h.ttl))
	}
}

// releaseOther releases key's holding if it belongs to an object other than uid: the IPAddress
// was deleted and created again under the same name.
func (l *ledger) releaseOther(key types.NamespacedName, uid types.UID, now time.Time) {
	if h, ok := l.holdings[key]; ok && h.uid != uid {
		l.release(key, h.uid, now)
	}
}

// lease keeps addr of pool from everyone until expires, unless an IPAddress holds it.
func (l *ledger) lease(pool poolKey, addr netip.Addr, expires time.Time) {
	if _, ok := l.byPool[pool][addr]; ok {
		return
	}
	if l.leases == nil {
		l.leases = map[poolKey]map[netip.Addr]time.Time{}
	}
	if l.leases[pool] == nil {
		l.leases[pool] = map[netip.Addr]time.Time{}
	}
	l.leases[pool][addr] = expires
}

// unlease ends the lease of addr of pool: its lease object expired or was deleted. It reports
// whether the ledger kept the address for it (a lease without ttl, or of an address held again,
// kept nothing).
func (l *ledger) unlease(pool poolKey, addr netip.Addr) bool {
	_, ok := l.leases[pool][addr]
	delete(l.leases[pool], addr)
	return ok
}

// holds reports whether the IPAddress key (uid) holds addr of pool.
func (l *ledger) holds(pool poolKey, addr netip.Addr, key types.NamespacedName, uid types.UID) bool {
	h, ok := l.holdings[key]
	return ok && h.uid == uid && h.pool == pool && h.addr == addr
}

// usage returns a test of the addresses of pool for the IPAddress key: held by another
// IPAddress, leased, or free (free too when key holds it itself). A lease past its time is
// free (the lease controller deletes its object). The test is valid until the ledger changes.
func (l *ledger) usage(pool poolKey, key types.NamespacedName, now time.Time) func(netip.Addr) usage {
	holders, leases := l.byPool[pool], l.leases[pool]
	return func(a netip.Addr) usage {
		if k, ok := holders[a]; ok && k != key {
			return held
		}
		if until, ok := leases[a]; ok && now.Before(until) {
			return leased
		}
		return free
	}
}
