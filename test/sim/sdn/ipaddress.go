package sdn

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// IPAddressWorkers is how many IPAddresses sdn-sim-ipaddress answers at once: each answer is a
// status write and a lease create, one after the other.
const IPAddressWorkers = 4

// setupIPAddress registers sdn-sim-ipaddress: it reconciles IPAddresses; when one is deleted,
// or a lease ends, it releases the address and retries the Pending IPAddresses of its pool.
// The attachments are sdn-sim-attach's (SDN's node agents write them, not its allocator).
func (s *Simulator) setupIPAddress(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-ipaddress").
		For(&sdnv1.IPAddress{}).
		Watches(&sdnv1.IPAddress{}, handler.Funcs{DeleteFunc: s.onIPAddressDeleted}).
		Watches(&sdnv1.IPAddressLease{}, handler.Funcs{DeleteFunc: s.onLeaseDeleted}).
		WithOptions(controller.Options{MaxConcurrentReconciles: IPAddressWorkers}).
		Complete(reconcile.Func(s.ReconcileIPAddress))
}

// ReconcileIPAddress allocates an address to the IPAddress req names, or says in its status why
// it cannot; an Allocated IPAddress keeps its address. It keeps the IPAddressLease of an
// allocated address. Pending IPAddresses are retried after RetryInterval; a write that loses an
// optimistic-locking race is retried soon.
func (s *Simulator) ReconcileIPAddress(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	d, err := s.decide(ctx, req)
	if err != nil || d.ip == nil {
		return ctrl.Result{}, err
	}
	if d.answer != nil {
		res, err := s.answer(ctx, d.ip, *d.answer)
		if err != nil || !res.IsZero() {
			return res, err
		}
	}
	if d.resolved {
		return s.ensureLease(ctx, d.ip, d.pool)
	}
	return ctrl.Result{}, nil
}

// decision is what decide found for one IPAddress.
type decision struct {
	// ip is the IPAddress; nil when there is nothing to do (gone, or being deleted).
	ip *sdnv1.IPAddress
	// pool is ip's pool, when resolved.
	pool     poolInfo
	resolved bool
	// answer is the status to write; nil when ip is Allocated already.
	answer *outcome
}

// decide chooses, under the simulator's lock, what to answer the IPAddress: a chosen address is
// reserved in the ledger at once, so the status write can happen outside the lock (in
// parallel with other allocations) without another IPAddress getting the same address.
func (s *Simulator) decide(ctx context.Context, req ctrl.Request) (decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := &sdnv1.IPAddress{}
	if err := s.Client.Get(ctx, req.NamespacedName, ip); err != nil {
		if apierrors.IsNotFound(err) {
			s.ledger.release(req.NamespacedName, "", s.now())
			return decision{}, nil
		}
		return decision{}, fmt.Errorf("getting IPAddress %s: %w", req.NamespacedName, err)
	}
	if ip.DeletionTimestamp != nil {
		return decision{}, nil
	}
	s.ledger.releaseOther(req.NamespacedName, ip.UID, s.now())
	pool, fail, err := s.resolve(ctx, ip)
	if err != nil {
		return decision{}, err
	}
	d := decision{ip: ip, pool: pool, resolved: fail == nil}
	if addr, ok := allocatedAddr(ip); ok {
		if d.resolved { // remember it, so the ledger survives a restart of the simulator
			s.ledger.hold(req.NamespacedName, holding{uid: ip.UID, pool: pool.key, addr: addr, ttl: pool.ttl})
		}
		return d, nil
	}
	d.answer = fail
	if d.answer == nil {
		chosen, err := s.allocate(ctx, ip, pool)
		if err != nil {
			return decision{}, err
		}
		d.answer = &chosen
	}
	if d.answer.ok() {
		s.ledger.hold(req.NamespacedName, holding{uid: ip.UID, pool: pool.key, addr: d.answer.addr, ttl: pool.ttl})
	}
	return d, nil
}

// allocate chooses an address for ip from pool: not held by any other IPAddress of the pool,
// nor kept by an orphaned lease. The ledger answers; it is seeded from the cache first.
func (s *Simulator) allocate(ctx context.Context, ip *sdnv1.IPAddress, pool poolInfo) (outcome, error) {
	if err := s.seed(ctx); err != nil {
		return outcome{}, err
	}
	return choose(ip.Spec, pool.space, s.ledger.usage(pool.key, client.ObjectKeyFromObject(ip), s.now())), nil
}

// seed records, once, every Allocated IPAddress and every lease the cache holds in the ledger:
// the addresses handed out, and kept by orphaned leases, before this simulator started (or
// before it reconciled them). Afterwards the ledger learns of every allocation from the
// simulator's own reservations, of allocations it did not make when it reconciles the
// IPAddress, and of leases from the lease controller.
func (s *Simulator) seed(ctx context.Context) error {
	if s.ledger.seeded {
		return nil
	}
	list := &sdnv1.IPAddressList{}
	if err := s.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read-only: no copies
		return fmt.Errorf("listing IPAddresses: %w", err)
	}
	poolOf, ttlOf := s.poolResolver(ctx), s.ttlResolver(ctx)
	for i := range list.Items {
		ip := &list.Items[i]
		key := client.ObjectKeyFromObject(ip)
		a, ok := allocatedAddr(ip)
		if _, known := s.ledger.holdings[key]; !ok || known {
			continue
		}
		if p, ok := poolOf(networkOf(ip)); ok {
			s.ledger.hold(key, holding{uid: ip.UID, pool: p, addr: a, ttl: ttlOf(p)})
		}
	}
	if err := s.seedLeases(ctx); err != nil {
		return err
	}
	s.ledger.seeded = true
	return nil
}

// answer writes o into ip's status. When the write fails, the reservation decide made is
// dropped (without a lease: the address was never handed out). A Pending answer is retried
// after RetryInterval.
func (s *Simulator) answer(ctx context.Context, ip *sdnv1.IPAddress, o outcome) (ctrl.Result, error) {
	uid := ip.UID
	err := s.writeStatus(ctx, ip, func(st *sdnv1.IPAddressStatus) { setStatus(st, o, ip.Generation) })
	if err != nil && o.ok() {
		s.mu.Lock()
		s.ledger.drop(client.ObjectKeyFromObject(ip), uid)
		s.mu.Unlock()
	}
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return ctrl.Result{}, err
	case !o.ok():
		return ctrl.Result{RequeueAfter: s.retryInterval()}, nil
	}
	return ctrl.Result{}, nil
}

// writeStatus patches ip's status as change makes it, with optimistic locking, when it differs.
// ip is updated to the server's answer.
func (s *Simulator) writeStatus(ctx context.Context, ip *sdnv1.IPAddress, change func(*sdnv1.IPAddressStatus)) error {
	base := ip.DeepCopy()
	change(&ip.Status)
	if equality.Semantic.DeepEqual(base.Status, ip.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := s.Client.Status().Patch(ctx, ip, patch); err != nil {
		return fmt.Errorf("writing status of IPAddress %s: %w", klog.KObj(ip), err)
	}
	return nil
}

// onIPAddressDeleted releases the address of a deleted IPAddress at once (so the retries it
// triggers can use it, unless its lease keeps it) and enqueues the Pending IPAddresses of the
// same pool.
func (s *Simulator) onIPAddressDeleted(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	ip, ok := e.Object.(*sdnv1.IPAddress)
	if !ok {
		return
	}
	s.mu.Lock()
	s.ledger.release(client.ObjectKeyFromObject(ip), ip.UID, s.now())
	s.mu.Unlock()
	pool, known := s.poolResolver(ctx)(networkOf(ip))
	for _, req := range s.pendingOfPool(ctx, pool, known) {
		q.Add(req)
	}
}

// pendingOfPool lists the IPAddresses without an address on pool; all of them when the pool is
// not known.
func (s *Simulator) pendingOfPool(ctx context.Context, pool poolKey, known bool) []reconcile.Request {
	list := &sdnv1.IPAddressList{}
	if err := s.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read-only: no copies
		ctrl.LoggerFrom(ctx).Error(err, "listing IPAddresses to retry")
		return nil
	}
	poolOf := s.poolResolver(ctx)
	var reqs []reconcile.Request
	for i := range list.Items {
		ip := &list.Items[i]
		if _, ok := allocatedAddr(ip); ok {
			continue
		}
		if p, ok := poolOf(networkOf(ip)); !known || (ok && p == pool) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ip)})
		}
	}
	return reqs
}
