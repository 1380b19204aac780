package sdn

import (
	"context"
	"net/netip"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// corpLease is the name of the lease of addr in ClusterIPAddressPool corp-pool.
func corpLease(addr string) string {
	return LeaseName(sdnv1.KindClusterIPAddressPool, "", "corp-pool", netip.MustParseAddr(addr))
}

// getLease returns the lease of that name, or nil when there is none.
func getLease(t *testing.T, s *Simulator, name string) *sdnv1.IPAddressLease {
	t.Helper()
	lease := &sdnv1.IPAddressLease{}
	err := s.Client.Get(context.Background(), client.ObjectKey{Name: name}, lease)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// reconcileLease runs ReconcileLease on name.
func reconcileLease(t *testing.T, s *Simulator, name string) ctrl.Result {
	t.Helper()
	res, err := s.ReconcileLease(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatalf("ReconcileLease(%s): %v", name, err)
	}
	return res
}

func TestAllocationMakesALease(t *testing.T) {
	s, _ := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", time.Minute, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.12")), ipAddr("a", "corp"))
	reconcileIP(t, s, ns, "a")
	lease := getLease(t, s, corpLease("10.0.0.10"))
	if lease == nil {
		t.Fatal("no IPAddressLease for the allocated 10.0.0.10")
	}
	if lease.Spec.IP != "10.0.0.10" || lease.Spec.TTL == nil || lease.Spec.TTL.Duration != time.Minute || lease.Status.OrphaningTimestamp != nil {
		t.Errorf("lease = %+v, want spec.ip 10.0.0.10, spec.ttl 1m (the pool's leaseTTL), not orphaned", lease)
	}
	if res := reconcileLease(t, s, lease.Name); !res.IsZero() || getLease(t, s, lease.Name).Status.OrphaningTimestamp != nil {
		t.Errorf("a lease whose IPAddress exists was orphaned or requeued (%+v)", res)
	}
}

// TestOrphanedLeaseKeepsTheAddressFromEveryName pins down SDN's documented lease: once its
// IPAddress is deleted, the lease is orphaned and keeps the address from any request — a
// Static one of the same name included — until spec.ttl has passed, then it is deleted and the
// address is handed out again.
func TestOrphanedLeaseKeepsTheAddressFromEveryName(t *testing.T) {
	s, clk := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", time.Minute, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.12")), ipAddr("a", "corp"))
	reconcileIP(t, s, ns, "a")
	deleteIP(t, s, "a")
	name := corpLease("10.0.0.10")
	if res := reconcileLease(t, s, name); res.RequeueAfter != time.Minute {
		t.Errorf("orphaned lease requeued after %v, want its ttl", res.RequeueAfter)
	}
	lease := getLease(t, s, name)
	if lease == nil || lease.Status.OrphaningTimestamp == nil || !lease.Status.OrphaningTimestamp.Time.Equal(clk.Now()) {
		t.Fatalf("lease after its IPAddress was deleted = %+v, want orphaningTimestamp %v", lease, clk.Now())
	}

	create(t, s, ipAddr("a", "corp", static("10.0.0.10"), func(ip *sdnv1.IPAddress) { ip.UID = "uid-a-again" }))
	_, a := reconcileIP(t, s, ns, "a")
	pending(ReasonIPLeased).check(t, a)
	create(t, s, ipAddr("b", "corp"))
	_, b := reconcileIP(t, s, ns, "b")
	ok("10.0.0.11", "10.0.0.0/24").check(t, b)

	clk.SetTime(clk.Now().Add(time.Minute))
	reconcileLease(t, s, name)
	if getLease(t, s, name) != nil {
		t.Error("the lease is still there once its ttl has passed")
	}
	_, a = reconcileIP(t, s, ns, "a")
	ok("10.0.0.10", "10.0.0.0/24").check(t, a)
	if l := getLease(t, s, name); l == nil || l.Annotations[AnnotationLeaseIPAddressUID] != "uid-a-again" {
		t.Errorf("the address's new lease = %+v, want one for the new IPAddress", l)
	}
}

func TestLeaseWithoutTTLIsDeletedWithItsIPAddress(t *testing.T) {
	s, _ := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.12")), ipAddr("a", "corp"))
	reconcileIP(t, s, ns, "a")
	deleteIP(t, s, "a")
	reconcileLease(t, s, corpLease("10.0.0.10"))
	if getLease(t, s, corpLease("10.0.0.10")) != nil {
		t.Error("a lease without ttl outlived its IPAddress")
	}
	create(t, s, ipAddr("b", "corp", static("10.0.0.10")))
	_, b := reconcileIP(t, s, ns, "b")
	ok("10.0.0.10", "10.0.0.0/24").check(t, b)
}

// TestLeaseSurvivesARestart pins down that leases are objects: a new simulator (empty ledger)
// keeps an orphaned lease's address, and the address of a lease whose IPAddress was deleted
// while no simulator ran.
func TestLeaseSurvivesARestart(t *testing.T) {
	s, clk := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", time.Minute, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.13")), ipAddr("a", "corp"), ipAddr("b", "corp"))
	reconcileIP(t, s, ns, "a")
	reconcileIP(t, s, ns, "b")
	deleteIP(t, s, "a")
	reconcileLease(t, s, corpLease("10.0.0.10"))
	// b is deleted while the simulator is down: nothing reconciles it.
	if err := s.Client.Delete(context.Background(), ipAddr("b", "corp")); err != nil {
		t.Fatal(err)
	}

	restarted := New(s.Client)
	restarted.Clock = clk
	create(t, restarted, ipAddr("sa", "corp", static("10.0.0.10")))
	create(t, restarted, ipAddr("sb", "corp", static("10.0.0.11")))
	create(t, restarted, ipAddr("c", "corp"))
	_, sa := reconcileIP(t, restarted, ns, "sa")
	_, sb := reconcileIP(t, restarted, ns, "sb")
	_, c := reconcileIP(t, restarted, ns, "c")
	pending(ReasonIPLeased).check(t, sa)
	pending(ReasonIPLeased).check(t, sb)
	ok("10.0.0.12", "10.0.0.0/24").check(t, c)

	reconcileLease(t, restarted, corpLease("10.0.0.11"))
	if l := getLease(t, restarted, corpLease("10.0.0.11")); l == nil || l.Status.OrphaningTimestamp == nil {
		t.Errorf("the lease of the IPAddress deleted while down = %+v, want orphaned", l)
	}
}

// TestNewHolderReplacesAnExpiredLease pins down that an address whose orphaned lease has
// expired is handed out even while the lease object is still there (its deletion pending), and
// that the new holder replaces that lease with its own.
func TestNewHolderReplacesAnExpiredLease(t *testing.T) {
	s, clk := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", time.Minute, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.10")), ipAddr("a", "corp"))
	reconcileIP(t, s, ns, "a")
	deleteIP(t, s, "a")
	name := corpLease("10.0.0.10")
	reconcileLease(t, s, name)
	clk.SetTime(clk.Now().Add(time.Minute))

	create(t, s, ipAddr("b", "corp"))
	res, b := reconcileIP(t, s, ns, "b")
	ok("10.0.0.10", "10.0.0.0/24").check(t, b)
	if res.RequeueAfter != conflictRetry || getLease(t, s, name) != nil {
		t.Fatalf("RequeueAfter %v, lease %+v: want the expired lease deleted and a retry", res.RequeueAfter, getLease(t, s, name))
	}
	reconcileIP(t, s, ns, "b")
	if l := getLease(t, s, name); l == nil || l.Annotations[AnnotationLeaseIPAddress] != ns+"/b" || l.Status.OrphaningTimestamp != nil {
		t.Errorf("lease after the retry = %+v, want b's", l)
	}
}
