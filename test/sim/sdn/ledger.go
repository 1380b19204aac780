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

// lease keeps a released address for a new IPAddress of the same name and namespace.
type lease struct {
	pool    poolKey
	addr    netip.Addr
	expires time.Time
}

// ledger is the simulator's memory of handed-out and leased addresses: the allocation state
// SDN keeps, so choosing an address costs a lookup per address tried instead of a scan of every
// IPAddress in the cluster. It is filled from the cache once (seeded) and then kept by the
// simulator's own reservations and releases; the cache can lag behind the simulator's status
// writes, the ledger cannot. Its zero value is ready to use; callers serialize access.
type ledger struct {
	holdings map[types.NamespacedName]holding
	// byPool indexes holdings by pool and address: which IPAddress holds an address.
	byPool map[poolKey]map[netip.Addr]types.NamespacedName
	leases map[types.NamespacedName]lease
	// seeded is true once every Allocated IPAddress of the cache has been recorded.
	seeded bool
}

// hold records that key holds h.addr; a lease of key ends, as the address is now held.
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
	delete(l.leases, key)
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

// release forgets key's holding when it belongs to uid (any uid when empty) and, when the pool
// has a leaseTTL, keeps the address for key until now+ttl.
func (l *ledger) release(key types.NamespacedName, uid types.UID, now time.Time) {
	h, ok := l.holdings[key]
	if !ok || (uid != "" && h.uid != uid) {
		return
	}
	l.forget(key)
	if h.ttl <= 0 {
		return
	}
	if l.leases == nil {
		l.leases = map[types.NamespacedName]lease{}
	}
	l.leases[key] = lease{pool: h.pool, addr: h.addr, expires: now.Add(h.ttl)}
}

// releaseOther releases key's holding if it belongs to an object other than uid: the IPAddress
// was deleted and created again under the same name.
func (l *ledger) releaseOther(key types.NamespacedName, uid types.UID, now time.Time) {
	if h, ok := l.holdings[key]; ok && h.uid != uid {
		l.release(key, h.uid, now)
	}
}

// taken returns a test for the addresses of pool that the ledger keeps from anyone but key: held
// ones and unexpired leases. Expired leases are dropped. The test is valid until the ledger
// changes.
func (l *ledger) taken(pool poolKey, key types.NamespacedName, now time.Time) func(netip.Addr) bool {
	leased := map[netip.Addr]bool{}
	for k, ls := range l.leases {
		switch {
		case !now.Before(ls.expires):
			delete(l.leases, k)
		case k != key && ls.pool == pool:
			leased[ls.addr] = true
		}
	}
	held := l.byPool[pool]
	return func(a netip.Addr) bool {
		if k, ok := held[a]; ok && k != key {
			return true
		}
		return leased[a]
	}
}

// leased returns the address of pool reserved for key by an unexpired lease.
func (l *ledger) leased(pool poolKey, key types.NamespacedName, now time.Time) (netip.Addr, bool) {
	ls, ok := l.leases[key]
	if !ok || ls.pool != pool || !now.Before(ls.expires) {
		return netip.Addr{}, false
	}
	return ls.addr, true
}
