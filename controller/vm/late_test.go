package vm

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/index/cacheindex"
	"github.com/vmipam/vmipam/controller/scheme"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/env"
)

// swappableSet is a PolicySource whose snapshot a test replaces between reconciles.
type swappableSet struct{ set atomic.Pointer[evaluator.Set] }

func (s *swappableSet) Set() *evaluator.Set { return s.set.Load() }

// lateFixture is a real kube-apiserver with a VM on a ready pool-less ClusterNetwork (one L2
// interface: no SDN needed to settle it), and a Reconciler reading through an informer cache
// with vmipam's indexes, whose record writes are counted.
type lateFixture struct {
	r            *Reconciler
	reader       client.Reader // the API server, past the cache
	policies     *swappableSet
	req          reconcile.Request
	recordWrites atomic.Int32
}

func newLateFixture(t *testing.T) *lateFixture {
	e := env.StartForTest(t, env.Options{})
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := cache.New(e.Config, cache.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Setup(ctx, cacheindex.Indexer{Cache: c}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	direct, err := client.New(e.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	f := &lateFixture{reader: direct, policies: &swappableSet{}}
	cached, err := client.NewWithWatch(e.Config, client.Options{Scheme: s, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(obj client.Object, err error) error {
		if _, ok := obj.(*v1alpha1.VirtualMachineIPAM); ok && err == nil {
			f.recordWrites.Add(1)
		}
		return err
	}
	counted := interceptor.NewClient(cached, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return count(obj, c.Create(ctx, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return count(obj, c.Patch(ctx, obj, p, opts...))
		}})
	f.r = &Reconciler{Client: counted, APIReader: direct, Policies: f.policies}

	network := build.ClusterNetwork("l2", "")
	vm := build.VM("ns", "v", build.OnClusterNetwork("l2", ""))
	for _, o := range []client.Object{build.Namespace("ns"), network, vm} {
		if err := direct.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	meta.SetStatusCondition(&network.Status.Conditions, metav1.Condition{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	if err := direct.Status().Update(ctx, network); err != nil {
		t.Fatal(err)
	}
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	// The cache shows the network's status and the VM before the first reconcile.
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		var n sdnv1.ClusterNetwork
		var v vmv1.VirtualMachine
		if c.Get(ctx, client.ObjectKeyFromObject(network), &n) == nil && meta.IsStatusConditionTrue(n.Status.Conditions, sdnv1.ConditionReady) &&
			c.Get(ctx, client.ObjectKeyFromObject(vm), &v) == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatal("cache did not show the fixture")
		}
	}
	f.req = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(vm)}
	return f
}

// reconcile runs one reconcile under set and returns its result and the VM's decision record
// as the API server has it afterwards (nil when absent).
func (f *lateFixture) reconcile(t *testing.T, set *evaluator.Set) (reconcile.Result, *v1alpha1.InterfaceDecision) {
	t.Helper()
	f.policies.set.Store(set)
	res, err := f.r.Reconcile(context.Background(), f.req)
	if err != nil {
		t.Fatal(err)
	}
	var rec v1alpha1.VirtualMachineIPAM
	if err := f.reader.Get(context.Background(), f.req.NamespacedName, &rec); err != nil {
		if apierrors.IsNotFound(err) {
			return res, nil
		}
		t.Fatal(err)
	}
	return res, &rec.Spec.Interfaces[0]
}

// A decision that failed only because its wall-clock deadline passed — a starved controller,
// here a policy whose matchCondition spins past a 20 ms deadline — is not published at once:
// the reconcile writes nothing and retries the VM with backoff; when the retry decides, the
// record is written once, with the real outcome.
func TestADecisionOutOfTimeOnceIsRetriedBeforeItsRecordIsWritten(t *testing.T) {
	f := newLateFixture(t)
	res, d := f.reconcile(t, slowSet(t, 20*time.Millisecond))
	if n := f.recordWrites.Load(); n != 0 || d != nil {
		t.Fatalf("after one decision out of time: %d record writes, decision %+v; want none", n, d)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("result %+v, want a retry with backoff", res)
	}
	if res.Priority == nil || *res.Priority != 0 {
		t.Errorf("retry at priority %v, want 0: the VM's own timer, not the priority it was last woken at", res.Priority)
	}
	_, d = f.reconcile(t, compiledSet(t))
	if n := f.recordWrites.Load(); n != 1 || d == nil || !d.Attach {
		t.Errorf("after the retry decided: %d record writes, decision %+v; want 1 write, attached", n, d)
	}
}

// A decision that runs out of time on its retry too is published: the policy may really be too
// slow, and the record must say so. The VM stays retried with backoff, so that a less busy
// moment can still decide it.
func TestADecisionOutOfTimeTwiceIsPublishedAndRetried(t *testing.T) {
	f := newLateFixture(t)
	slow := slowSet(t, 20*time.Millisecond)
	f.reconcile(t, slow)
	res, d := f.reconcile(t, slow)
	if d == nil || d.Reason != string(evaluator.ReasonPolicyError) || !strings.Contains(d.Message, "deadline") {
		t.Fatalf("decision %+v, want a PolicyError naming the deadline", d)
	}
	if n := f.recordWrites.Load(); n != 1 {
		t.Errorf("%d record writes, want 1", n)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("result %+v, want a retry with backoff", res)
	}
	// A reconcile that decides resets the record: the next failure out of time is held back again.
	f.reconcile(t, compiledSet(t))
	before := f.recordWrites.Load()
	if _, d := f.reconcile(t, slow); f.recordWrites.Load() != before || d == nil || d.Reason != "" {
		t.Errorf("a failure out of time after a decided reconcile wrote the record (decision %+v)", d)
	}
}
