package sdn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// Annotations by which the stand-in ties an IPAddressLease to its pool and IPAddress. SDN does
// not document how it does; these are the stand-in's own. A lease without them is not the
// stand-in's and is left alone (it keeps no address).
const (
	// AnnotationLeasePool is the lease's pool: "Kind/Namespace/Name" (no namespace for a
	// ClusterIPAddressPool).
	AnnotationLeasePool = "sdn.vmipam.test/pool"
	// AnnotationLeaseIPAddress is the IPAddress holding the address: "namespace/name".
	AnnotationLeaseIPAddress = "sdn.vmipam.test/ipaddress"
	// AnnotationLeaseIPAddressUID is that IPAddress's UID.
	AnnotationLeaseIPAddressUID = "sdn.vmipam.test/ipaddress-uid"
)

// indexLeaseIPAddress is the cache index of leases by AnnotationLeaseIPAddress.
const indexLeaseIPAddress = "sdn.vmipam.test/lease-ipaddress"

// LeaseName is the name of the lease of addr in the pool kind/namespace/name: one lease per
// address of a pool, "ip-" and the address with dashes, then a hash of the pool (pools of
// different namespaces may hold the same addresses).
func LeaseName(kind, namespace, name string, addr netip.Addr) string {
	sum := sha256.Sum256([]byte(kind + "/" + namespace + "/" + name))
	return "ip-" + strings.NewReplacer(".", "-", ":", "-").Replace(addr.String()) + "-" + hex.EncodeToString(sum[:4])
}

// leaseRef is what the stand-in's annotations say about a lease.
type leaseRef struct {
	pool   poolKey
	addr   netip.Addr
	holder types.NamespacedName
	uid    types.UID
}

// refOf reads lease's annotations and spec.ip; ok is false for a lease that is not the
// stand-in's.
func refOf(lease *sdnv1.IPAddressLease) (leaseRef, bool) {
	a := lease.Annotations
	pool := strings.Split(a[AnnotationLeasePool], "/")
	holderNS, holderName, okHolder := strings.Cut(a[AnnotationLeaseIPAddress], "/")
	addr, err := netip.ParseAddr(lease.Spec.IP)
	if len(pool) != 3 || !okHolder || err != nil || a[AnnotationLeaseIPAddressUID] == "" {
		return leaseRef{}, false
	}
	return leaseRef{pool: poolKey{Kind: pool[0], Namespace: pool[1], Name: pool[2]}, addr: addr,
		holder: types.NamespacedName{Namespace: holderNS, Name: holderName}, uid: types.UID(a[AnnotationLeaseIPAddressUID])}, true
}

// newLease is the lease of ip's address addr in pool.
func newLease(ip *sdnv1.IPAddress, pool poolInfo, addr netip.Addr) *sdnv1.IPAddressLease {
	k := pool.key
	lease := &sdnv1.IPAddressLease{
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(k.Kind, k.Namespace, k.Name, addr), Annotations: map[string]string{
			AnnotationLeasePool:         k.Kind + "/" + k.Namespace + "/" + k.Name,
			AnnotationLeaseIPAddress:    ip.Namespace + "/" + ip.Name,
			AnnotationLeaseIPAddressUID: string(ip.UID),
		}},
		Spec: sdnv1.IPAddressLeaseSpec{IP: addr.String()},
	}
	if pool.ttl > 0 {
		lease.Spec.TTL = &metav1.Duration{Duration: pool.ttl}
	}
	return lease
}

// ensureLease makes sure the allocated IPAddress ip has its lease. A lease of the same address
// left by an earlier holder (past its time: the ledger let the address go) is deleted first.
func (s *Simulator) ensureLease(ctx context.Context, ip *sdnv1.IPAddress, pool poolInfo) (ctrl.Result, error) {
	addr, ok := allocatedAddr(ip)
	if !ok {
		return ctrl.Result{}, nil
	}
	want := newLease(ip, pool, addr)
	cur := &sdnv1.IPAddressLease{}
	err := s.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	switch {
	case apierrors.IsNotFound(err):
		err = s.Client.Create(ctx, want)
		if apierrors.IsAlreadyExists(err) { // the cache has not seen it yet: look again soon
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("creating IPAddressLease %s: %w", want.Name, err)
		}
		return ctrl.Result{}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("getting IPAddressLease %s: %w", want.Name, err)
	}
	if ref, ok := refOf(cur); ok && ref.holder == client.ObjectKeyFromObject(ip) && ref.uid == ip.UID {
		return ctrl.Result{}, nil
	}
	err = s.Client.Delete(ctx, cur, client.Preconditions{UID: &cur.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("deleting the earlier holder's IPAddressLease %s: %w", cur.Name, err)
	}
	return ctrl.Result{RequeueAfter: conflictRetry}, nil
}

// setupLease registers sdn-sim-lease: it orphans the leases whose IPAddress is gone and deletes
// them once their ttl has passed.
func (s *Simulator) setupLease(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &sdnv1.IPAddressLease{}, indexLeaseIPAddress, leaseIPAddressOf); err != nil {
		return fmt.Errorf("indexing IPAddressLeases by IPAddress: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-lease").
		For(&sdnv1.IPAddressLease{}).
		Watches(&sdnv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(s.leasesOf)).
		Complete(reconcile.Func(s.ReconcileLease))
}

// leaseIPAddressOf is the index function of indexLeaseIPAddress.
func leaseIPAddressOf(o client.Object) []string {
	if v := o.GetAnnotations()[AnnotationLeaseIPAddress]; v != "" {
		return []string{v}
	}
	return nil
}

// leasesOf maps an IPAddress to the leases naming it as their holder.
func (s *Simulator) leasesOf(ctx context.Context, ip client.Object) []reconcile.Request {
	leases := &sdnv1.IPAddressLeaseList{}
	if err := s.Client.List(ctx, leases, client.MatchingFields{indexLeaseIPAddress: ip.GetNamespace() + "/" + ip.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing IPAddressLeases", "ipAddress", klog.KObj(ip))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(leases.Items))
	for i := range leases.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&leases.Items[i])})
	}
	return reqs
}

// ReconcileLease keeps a lease of the stand-in's: while its IPAddress (of the UID it was made
// for) exists, nothing changes; once it is gone the lease is orphaned (status.orphaningTimestamp)
// and keeps its address from every new IPAddress until orphaningTimestamp + spec.ttl, when it
// is deleted. A lease without ttl is deleted as soon as its IPAddress is gone.
func (s *Simulator) ReconcileLease(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lease := &sdnv1.IPAddressLease{}
	if err := s.Client.Get(ctx, req.NamespacedName, lease); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ref, ok := refOf(lease)
	if !ok || lease.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	live, err := s.holderExists(ctx, ref)
	if err != nil || live {
		return ctrl.Result{}, err
	}
	now := s.now()
	var ttl time.Duration
	if lease.Spec.TTL != nil {
		ttl = lease.Spec.TTL.Duration
	}
	orphaned := now
	switch {
	case lease.Status.OrphaningTimestamp != nil:
		orphaned = lease.Status.OrphaningTimestamp.Time
	case ttl > 0:
		base := lease.DeepCopy()
		lease.Status.OrphaningTimestamp = &metav1.Time{Time: now}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := s.Client.Status().Patch(ctx, lease, patch); err != nil {
			if apierrors.IsConflict(err) {
				return ctrl.Result{RequeueAfter: conflictRetry}, nil
			}
			return ctrl.Result{}, fmt.Errorf("orphaning IPAddressLease %s: %w", lease.Name, err)
		}
		orphaned = lease.Status.OrphaningTimestamp.Time // as stored (seconds)
	}
	expires := orphaned.Add(ttl)
	s.mu.Lock()
	s.ledger.release(ref.holder, ref.uid, now)
	if now.Before(expires) {
		s.ledger.lease(ref.pool, ref.addr, expires)
	}
	s.mu.Unlock()
	if now.Before(expires) {
		return ctrl.Result{RequeueAfter: expires.Sub(now)}, nil
	}
	err = s.Client.Delete(ctx, lease, client.Preconditions{UID: &lease.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("deleting expired IPAddressLease %s: %w", lease.Name, err)
	}
	return ctrl.Result{}, nil
}

// holderExists reports whether the IPAddress ref names still exists as the object the lease was
// made for. The cache answers: a lease is created after its IPAddress was read from the same
// cache, so an IPAddress missing from it was deleted.
func (s *Simulator) holderExists(ctx context.Context, ref leaseRef) (bool, error) {
	ip := &sdnv1.IPAddress{}
	err := s.Client.Get(ctx, ref.holder, ip)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("getting IPAddress %s: %w", ref.holder, err)
	}
	return ip.UID == ref.uid, nil
}

// onLeaseDeleted ends the lease's hold on its address in the ledger and, when it kept the
// address, enqueues the Pending IPAddresses of its pool (they may take the address now); it
// enqueues the lease's holder, which makes its lease again if it still holds the address.
func (s *Simulator) onLeaseDeleted(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	lease, ok := e.Object.(*sdnv1.IPAddressLease)
	if !ok {
		return
	}
	ref, ok := refOf(lease)
	if !ok {
		return
	}
	s.mu.Lock()
	kept := s.ledger.unlease(ref.pool, ref.addr)
	s.mu.Unlock()
	q.Add(reconcile.Request{NamespacedName: ref.holder})
	if !kept { // a lease without ttl: its IPAddress's deletion retried the pool already
		return
	}
	for _, req := range s.pendingOfPool(ctx, ref.pool, true) {
		q.Add(req)
	}
}

// seedLeases records in the ledger the addresses the cache's leases keep: an orphaned lease
// until its time, a lease whose holder the ledger does not know (deleted while the simulator
// was down) from now on, for its ttl; the lease controller orphans it.
func (s *Simulator) seedLeases(ctx context.Context) error {
	leases := &sdnv1.IPAddressLeaseList{}
	if err := s.Client.List(ctx, leases, client.UnsafeDisableDeepCopy); err != nil { // read-only: no copies
		return fmt.Errorf("listing IPAddressLeases: %w", err)
	}
	now := s.now()
	for i := range leases.Items {
		lease := &leases.Items[i]
		ref, ok := refOf(lease)
		if !ok || lease.Spec.TTL == nil || s.ledger.holds(ref.pool, ref.addr, ref.holder, ref.uid) {
			continue
		}
		orphaned := now
		if lease.Status.OrphaningTimestamp != nil {
			orphaned = lease.Status.OrphaningTimestamp.Time
		}
		if expires := orphaned.Add(lease.Spec.TTL.Duration); now.Before(expires) {
			s.ledger.lease(ref.pool, ref.addr, expires)
		}
	}
	return nil
}
