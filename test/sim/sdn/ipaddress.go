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

// setupIPAddress registers sdn-sim-ipaddress: it reconciles IPAddresses and, when one is
// deleted, releases its address and retries the Pending IPAddresses of its pool.
func (s *Simulator) setupIPAddress(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-ipaddress").
		For(&sdnv1.IPAddress{}).
		Watches(&sdnv1.IPAddress{}, handler.Funcs{DeleteFunc: s.onIPAddressDeleted}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(reconcile.Func(s.ReconcileIPAddress))
}

// ReconcileIPAddress allocates an address to the IPAddress req names, or says in its status why
// it cannot. An Allocated IPAddress keeps its address. Pending ones are retried after
// RetryInterval; a status write that loses an optimistic-locking race is retried soon.
func (s *Simulator) ReconcileIPAddress(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	o, ip, pool, res, err := s.decide(ctx, req)
	if o == nil || err != nil {
		return res, err
	}
	return s.answer(ctx, ip, pool, *o)
}

// decide chooses, under the simulator's lock, what to answer the IPAddress: a chosen address is
// reserved in the ledger at once, so the status write can happen outside the lock (in
// parallel with other allocations) without another IPAddress getting the same address. A nil
// outcome means there is nothing to write.
func (s *Simulator) decide(ctx context.Context, req ctrl.Request) (*outcome, *sdnv1.IPAddress, poolInfo, ctrl.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := &sdnv1.IPAddress{}
	if err := s.Client.Get(ctx, req.NamespacedName, ip); err != nil {
		if apierrors.IsNotFound(err) {
			s.ledger.release(req.NamespacedName, "", s.now())
			return nil, nil, poolInfo{}, ctrl.Result{}, nil
		}
		return nil, nil, poolInfo{}, ctrl.Result{}, fmt.Errorf("getting IPAddress %s: %w", req.NamespacedName, err)
	}
	if ip.DeletionTimestamp != nil {
		return nil, nil, poolInfo{}, ctrl.Result{}, nil
	}
	s.ledger.releaseOther(req.NamespacedName, ip.UID, s.now())
	pool, fail, err := s.resolve(ctx, ip)
	if err != nil {
		return nil, nil, pool, ctrl.Result{}, err
	}
	if addr, ok := allocatedAddr(ip); ok {
		if fail == nil { // remember it, so the ledger survives a restart of the simulator
			s.ledger.hold(req.NamespacedName, holding{uid: ip.UID, pool: pool.key, addr: addr, ttl: pool.ttl})
		}
		return nil, nil, pool, ctrl.Result{}, nil
	}
	o := fail
	if o == nil {
		chosen, err := s.allocate(ctx, ip, pool)
		if err != nil {
			return nil, nil, pool, ctrl.Result{}, err
		}
		o = &chosen
	}
	if o.ok() {
		s.ledger.hold(req.NamespacedName, holding{uid: ip.UID, pool: pool.key, addr: o.addr, ttl: pool.ttl})
	}
	return o, ip, pool, ctrl.Result{}, nil
}

// allocate chooses an address for ip from pool: not held by any other IPAddress of the pool,
// nor leased to another name. The ledger answers; it is seeded from the cache first.
func (s *Simulator) allocate(ctx context.Context, ip *sdnv1.IPAddress, pool poolInfo) (outcome, error) {
	if err := s.seed(ctx); err != nil {
		return outcome{}, err
	}
	key := client.ObjectKeyFromObject(ip)
	leased, _ := s.ledger.leased(pool.key, key, s.now())
	return choose(ip.Spec, pool.space, s.ledger.taken(pool.key, key, s.now()), leased), nil
}

// seed records, once, every Allocated IPAddress the cache holds in the ledger: the addresses
// handed out before this simulator started (or before it reconciled them). Afterwards the
// ledger learns of every allocation from the simulator's own reservations and of allocations
// it did not make when it reconciles the IPAddress.
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
	s.ledger.seeded = true
	return nil
}

// answer writes o into ip's status. When the write fails, the reservation decide made is
// dropped (without a lease: the address was never handed out).
func (s *Simulator) answer(ctx context.Context, ip *sdnv1.IPAddress, pool poolInfo, o outcome) (ctrl.Result, error) {
	err := s.writeStatus(ctx, ip, o)
	if err != nil && o.ok() {
		s.mu.Lock()
		s.ledger.drop(client.ObjectKeyFromObject(ip), ip.UID)
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

// writeStatus patches ip's status to o, with optimistic locking, when it differs.
func (s *Simulator) writeStatus(ctx context.Context, ip *sdnv1.IPAddress, o outcome) error {
	base := ip.DeepCopy()
	setStatus(&ip.Status, o, ip.Generation)
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
// triggers can use it) and enqueues the Pending IPAddresses of the same pool.
func (s *Simulator) onIPAddressDeleted(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	ip, ok := e.Object.(*sdnv1.IPAddress)
	if !ok {
		return
	}
	s.mu.Lock()
	s.ledger.release(client.ObjectKeyFromObject(ip), ip.UID, s.now())
	s.mu.Unlock()
	for _, req := range s.pendingOfPool(ctx, ip) {
		q.Add(req)
	}
}

// pendingOfPool lists the IPAddresses without an address on the pool of deleted's network;
// all of them when that pool cannot be resolved any more.
func (s *Simulator) pendingOfPool(ctx context.Context, deleted *sdnv1.IPAddress) []reconcile.Request {
	list := &sdnv1.IPAddressList{}
	if err := s.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read-only: no copies
		ctrl.LoggerFrom(ctx).Error(err, "listing IPAddresses to retry")
		return nil
	}
	poolOf := s.poolResolver(ctx)
	pool, known := poolOf(networkOf(deleted))
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
