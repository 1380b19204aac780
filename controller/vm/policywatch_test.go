package vm

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func fanOutVM(ns, name string, lbls map[string]string, network string) *vmv1.VirtualMachine {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: network}}
	return vm
}

func names(reqs []reconcile.Request) []string {
	out := []string{}
	for _, r := range reqs {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	return out
}

// TestPolicyFanOutEnqueuesOnlyVMsTheOldOrNewMatchSelects: a policy change re-evaluates the VMs
// its previous and its new match block select, and no others.
func TestPolicyFanOutEnqueuesOnlyVMsTheOldOrNewMatchSelects(t *testing.T) {
	prod := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}}
	dev := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev"}}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(prod, dev,
		fanOutVM("prod", "gold", map[string]string{"tier": "gold"}, "corp"),
		fanOutVM("prod", "plain", nil, "corp"),
		fanOutVM("prod", "other-net", map[string]string{"tier": "gold"}, "lab"),
		fanOutVM("dev", "gold", map[string]string{"tier": "gold"}, "corp"),
	).Build()
	f := &policyFanOut{r: &Reconciler{Client: c}, seen: map[string]v1alpha1.Match{}}
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, CreationTimestamp: metav1.Now()}}
	p.Spec.Match = v1alpha1.Match{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		VMSelector:        &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}},
		Networks:          []v1alpha1.NetworkSelector{{Type: "ClusterNetwork", Name: "corp"}},
	}
	if got := names(f.affected(context.Background(), p)); len(got) != 1 || got[0] != "prod/gold" {
		t.Fatalf("first version: %v, want [prod/gold]", got)
	}

	p.Generation = 2
	p.Spec.Match.NamespaceSelector = nil // now dev too
	got := names(f.affected(context.Background(), p))
	if len(got) != 2 || got[0] != "dev/gold" || got[1] != "prod/gold" {
		t.Errorf("widened match: %v, want [dev/gold prod/gold]", got)
	}

	removed := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if got := names(f.affected(context.Background(), removed)); len(got) != 2 {
		t.Errorf("removal re-evaluates what the last version matched: %v", got)
	}
}

// A selector that does not parse selects every VM (its policy's status reports the error;
// re-evaluating too many VMs is only slower), while the rest of the match still narrows.
func TestPolicyFanOutTreatsAnUnparsableSelectorAsEverything(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(
		fanOutVM("prod", "gold", map[string]string{"tier": "gold"}, "corp"),
		fanOutVM("prod", "plain", nil, "corp"),
		fanOutVM("prod", "other-net", nil, "lab"),
	).Build()
	f := &policyFanOut{r: &Reconciler{Client: c}, seen: map[string]v1alpha1.Match{}}
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, CreationTimestamp: metav1.Now()}}
	p.Spec.Match = v1alpha1.Match{
		VMSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}},
		Networks:   []v1alpha1.NetworkSelector{{Type: "ClusterNetwork", Name: "corp"}},
	}
	if got := names(f.affected(context.Background(), p)); len(got) != 2 || got[0] != "prod/gold" || got[1] != "prod/plain" {
		t.Errorf("affected = %v, want [prod/gold prod/plain]", got)
	}
}

// TestPolicyFanOutQueuesEveryVMAtOnce: a change over more VMs than the default rate limiter's
// burst is ready at once — no token bucket spreads it over seconds — at the priority of any
// other change (a lower one could be held back for good by a stream of new VMs), and a VM
// already queued keeps its place.
func TestPolicyFanOutQueuesEveryVMAtOnce(t *testing.T) {
	const n = 250 // more than client-go's default controller rate limiter's burst of 100
	b := fake.NewClientBuilder().WithScheme(runtimeScheme(t))
	for i := range n {
		b = b.WithObjects(fanOutVM("prod", fmt.Sprintf("vm-%03d", i), map[string]string{"tier": "gold"}, "corp"))
	}
	f := &policyFanOut{r: &Reconciler{Client: b.Build()}, seen: map[string]v1alpha1.Match{}}
	q := priorityqueue.New[reconcile.Request]("fanout", func(o *priorityqueue.Opts[reconcile.Request]) {
		o.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]() // the controller's
	})
	defer q.ShutDown()
	first := reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "prod", Name: "vm-249"}}
	q.Add(first) // a VM's own event, before the change
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, CreationTimestamp: metav1.Now()}}
	p.Spec.Match.VMSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
	f.Generic(context.Background(), event.GenericEvent{Object: p}, q)
	if got := q.Len(); got != n {
		t.Fatalf("%d VMs ready right after the change, want all %d", got, n)
	}
	for i := range n {
		req, prio, _ := q.GetWithPriority()
		if i == 0 && req != first {
			t.Fatalf("first out: %v, want the VM queued before the change", req)
		}
		if prio != 0 {
			t.Fatalf("%v at priority %d, want 0", req, prio)
		}
		q.Done(req)
	}
}

// TestPolicyFanOutListsOnceWithoutAVMSelectorAndOrdersByNamespace: a policy whose match has no
// vmSelector needs every VM, so its change lists them once, whatever the versions; requests
// come by namespace, then name ("prod/gold" before "prod-b/gold", which a comparison of the
// joined key reverses).
func TestPolicyFanOutListsOnceWithoutAVMSelectorAndOrdersByNamespace(t *testing.T) {
	lists := 0
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod-b", Labels: map[string]string{"env": "prod"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dev"}},
		fanOutVM("prod-b", "gold", nil, "corp"), fanOutVM("prod", "gold", nil, "corp"), fanOutVM("dev", "gold", nil, "corp"),
	).WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		if _, ok := l.(*vmv1.VirtualMachineList); ok {
			lists++
		}
		return c.List(ctx, l, o...)
	}}).Build()
	f := &policyFanOut{r: &Reconciler{Client: c}, seen: map[string]v1alpha1.Match{}}
	p := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1, CreationTimestamp: metav1.Now()}}
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	f.affected(context.Background(), p)

	lists = 0
	p.Generation = 2
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}
	got := names(f.affected(context.Background(), p))
	if lists != 1 {
		t.Errorf("a namespaceSelector-only policy's change listed every VM %d times, want 1", lists)
	}
	if want := []string{"prod/gold", "prod-b/gold"}; !slices.Equal(got, want) {
		t.Errorf("requests %v, want %v (by namespace, then name)", got, want)
	}
}
