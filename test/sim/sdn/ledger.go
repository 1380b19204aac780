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

// ledger is the simulator's memory of handed-out and leased addresses. The cache alone can lag
// behind the simulator's own status writes; the ledger closes that gap, so two IPAddresses never
// get the same address. Its zero value is ready to use; callers serialize access.
type ledger struct {
	holdings map[types.NamespacedName]holding
	leases   map[types.NamespacedName]lease
}

// hold records that key holds h.addr; a lease of key ends, as the address is now held.
func (l *ledger) hold(key types.NamespacedName, h holding) {
	if l.holdings == nil {
		l.holdings = map[types.NamespacedName]holding{}
	}
	l.holdings[key] = h
	delete(l.leases, key)
}

// drop forgets key's holding of uid without a lease: a reservation whose status write failed.
func (l *ledger) drop(key types.NamespacedName, uid types.UID) {
	if h, ok := l.holdings[key]; ok && h.uid == uid {
		delete(l.holdings, key)
	}
}

// release forgets key's holding when it belongs to uid (any uid when empty) and, when the pool
// has a leaseTTL, keeps the address for key until now+ttl.
func (l *ledger) release(key types.NamespacedName, uid types.UID, now time.Time) {
	h, ok := l.holdings[key]
	if !ok || (uid != "" && h.uid != uid) {
		return
	}
	delete(l.holdings, key)
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

// taken adds to used the addresses of pool that the ledger keeps from anyone but key: held
// ones and unexpired leases. Expired leases are dropped.
func (l *ledger) taken(pool poolKey, key types.NamespacedName, now time.Time, used map[netip.Addr]bool) {
	for k, h := range l.holdings {
		if k != key && h.pool == pool {
			used[h.addr] = true
		}
	}
	for k, ls := range l.leases {
		switch {
		case !now.Before(ls.expires):
			delete(l.leases, k)
		case k != key && ls.pool == pool:
			used[ls.addr] = true
		}
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
