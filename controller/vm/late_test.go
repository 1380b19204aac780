package vm

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/scheme"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/env"
)

// swappableSet is a PolicySource whose snapshot a test replaces between reconciles.
type swappableSet struct{ set atomic.Pointer[evaluator.Set] }

func (s *swappableSet) Set() *evaluator.Set { return s.set.Load() }

// lateFixture is a real kube-apiserver with a VM on a ready pool-less ClusterNetwork (one L2
// interface: no SDN needed to settle it), and a Reconciler reading through an informer cache
// with vmipam's indexes, whose status patches are counted.
type lateFixture struct {
	r            *Reconciler
	reader       client.Reader // the API server, past the cache
	policies     *swappableSet
	req          reconcile.Request
	statusWrites atomic.Int32
}

func newLateFixture(t *testing.T) *lateFixture {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	e, err := env.Start(env.Options{})
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
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
	if err := index.Setup(ctx, index.CacheIndexer{Cache: c}); err != nil {
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
	counted := interceptor.NewClient(cached, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			err := c.SubResource(sub).Patch(ctx, obj, p, opts...)
			if err == nil && sub == "status" {
				f.statusWrites.Add(1)
			}
			return err
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

// reconcile runs one reconcile under set and returns its result and the VM's NetworkReady as
// the API server has it afterwards (nil when absent).
func (f *lateFixture) reconcile(t *testing.T, set *evaluator.Set) (reconcile.Result, *metav1.Condition) {
	t.Helper()
	f.policies.set.Store(set)
	res, err := f.r.Reconcile(context.Background(), f.req)
	if err != nil {
		t.Fatal(err)
	}
	var vm vmv1.VirtualMachine
	if err := f.reader.Get(context.Background(), f.req.NamespacedName, &vm); err != nil {
		t.Fatal(err)
	}
	return res, meta.FindStatusCondition(vm.Status.Conditions, ConditionNetworkReady)
}

// A decision that failed only because its wall-clock deadline passed — a starved controller,
// here a policy whose matchCondition spins past a 20 ms deadline — is not published at once:
// the reconcile writes nothing and retries the VM with backoff; when the retry decides, the
// VM's status is written once, with the real outcome. Before, the first reconcile wrote a
// PolicyError status and the retry wrote it again (issue #16's bench: 1,008 status patches
// for 1,000 VMs at load average ~9).
func TestADecisionOutOfTimeOnceIsRetriedBeforeItsStatusIsWritten(t *testing.T) {
	f := newLateFixture(t)
	res, ready := f.reconcile(t, slowSet(t, 20*time.Millisecond))
	if n := f.statusWrites.Load(); n != 0 || ready != nil {
		t.Fatalf("after one decision out of time: %d status writes, NetworkReady %+v; want none", n, ready)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("result %+v, want a retry with backoff", res)
	}
	_, ready = f.reconcile(t, compiledSet(t))
	if n := f.statusWrites.Load(); n != 1 || ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("after the retry decided: %d status writes, NetworkReady %+v; want 1 write, NetworkReady True", n, ready)
	}
}

// A decision that runs out of time on its retry too is published: the policy may really be too
// slow, and status must say so. The VM stays retried with backoff, so that a less busy moment
// can still decide it.
func TestADecisionOutOfTimeTwiceIsPublishedAndRetried(t *testing.T) {
	f := newLateFixture(t)
	slow := slowSet(t, 20*time.Millisecond)
	f.reconcile(t, slow)
	res, ready := f.reconcile(t, slow)
	if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, string(evaluator.ReasonPolicyError)) ||
		!strings.Contains(ready.Message, "deadline") {
		t.Fatalf("NetworkReady %+v, want False with a PolicyError naming the deadline", ready)
	}
	if n := f.statusWrites.Load(); n != 1 {
		t.Errorf("%d status writes, want 1", n)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("result %+v, want a retry with backoff", res)
	}
	// A reconcile that decides resets the record: the next failure out of time is held back again.
	f.reconcile(t, compiledSet(t))
	before := f.statusWrites.Load()
	if _, ready := f.reconcile(t, slow); f.statusWrites.Load() != before || ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("a failure out of time after a decided reconcile wrote status (NetworkReady %+v)", ready)
	}
}
