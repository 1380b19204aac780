package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// slowSet decides with a policy whose matchCondition runs until the evaluator's deadline
// (a million-iteration comprehension under cost limits raised out of the way): every
// interface takes at least the deadline.
func slowSet(t *testing.T, deadline time.Duration) *evaluator.Set {
	t.Helper()
	return compiledSetWith(t, evaluator.Limits{Deadline: deadline, StaticCostLimit: 1e12, PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12, ComprehensionRange: 1e12},
		&v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
			MatchConditions: []v1alpha1.NamedExpression{{Name: "spin",
				Expression: "lists.range(1000).all(x, lists.range(1000).all(y, x + y >= 0))"}},
			Allocation: &v1alpha1.Expression{Expression: "'Auto'"}}})
}

// manyInterfaces is a VM with n additional interfaces on ready pooled ClusterNetworks.
func manyInterfaces(set *evaluator.Set, n int) *scope {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns", UID: "uid-v"}}
	s := &scope{vm: vm, set: set}
	for i := range n {
		spec := vmv1.NetworksSpec{Type: "ClusterNetwork", Name: fmt.Sprintf("n%d", i)}
		vm.Spec.Networks = append(vm.Spec.Networks, spec)
		s.interfaces = append(s.interfaces, &iface{index: i, spec: spec, key: "ClusterNetwork/" + spec.Name, dupOf: -1, network: pooled()})
	}
	return s
}

// A VM with many interfaces spends at most its evaluation budget in one reconcile, not N times
// the per-interface deadline: with a 20 ms deadline every interface takes at least 20 ms, so a
// 50 ms budget is spent within three, and the rest get a PolicyError naming the budget, without
// being evaluated.
func TestAVMsInterfacesShareOneEvaluationBudget(t *testing.T) {
	s := manyInterfaces(slowSet(t, 20*time.Millisecond), 10)
	s.budget = 50 * time.Millisecond
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	if !s.overBudget || !plan(s).Retry() {
		t.Error("overBudget = false, want true and the plan retried")
	}
	first, last := s.interfaces[0], s.interfaces[len(s.interfaces)-1]
	if first.problem == nil || strings.Contains(first.problem.message, "evaluation budget") {
		t.Errorf("first interface: %+v, want the policy's own deadline error", first.problem)
	}
	if last.problem == nil || last.problem.reason != string(evaluator.ReasonPolicyError) ||
		!strings.Contains(last.problem.message, "not evaluated: the VM's evaluation budget was spent on the interfaces before this one") {
		t.Errorf("last interface: %+v, want a PolicyError naming the VM's budget", last.problem)
	}
}

// fakeWorld is a reader holding objs, indexed like the manager's cache.
func fakeWorld(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(objs...)
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// builderIndexer registers indexes on a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// The dry run never retries, so the interfaces its VM budget leaves undecided say that the dry
// run does not retry them; the record it shows is what the controller would write, with the
// controller's text.
func TestTheDryRunsBudgetErrorPromisesNoRetry(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns", UID: "uid-v"}}
	// Each interface takes the 20 ms deadline: the 2 s default budget ends well before 200.
	for i := range 200 {
		vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: "ClusterNetwork", Name: fmt.Sprintf("n%d", i)})
	}
	p, err := Compute(context.Background(), fakeWorld(t), slowSet(t, 20*time.Millisecond), vm, Options{Now: t0, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	last := p.Interfaces[len(p.Interfaces)-1].Decision
	if !strings.Contains(last.Message, "evaluation budget") || !strings.Contains(last.Message, "the dry run does not retry") ||
		strings.Contains(last.Message, "retried with backoff") {
		t.Errorf("last interface's message = %q, want the VM budget named and that the dry run does not retry", last.Message)
	}
	d := p.Record.Spec.Interfaces[len(p.Record.Spec.Interfaces)-1]
	if !strings.Contains(d.Message, errVMBudget.Error()) || strings.Contains(d.Message, "the dry run does not retry") {
		t.Errorf("record message = %q, want the controller's budget text (%q) and not the dry run's", d.Message, errVMBudget)
	}
}

// removedScope is a running VM whose spec kept ClusterNetwork/a and dropped ClusterNetwork/b,
// which its launcher pod still carries with b's Auto IPAddress.
func removedScope(t *testing.T, set *evaluator.Set) *scope {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns", UID: "uid-v"}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "a"}}
	ipA, ipB := autoOf(vm, "a", "10.0.0.7"), autoOf(vm, "b", "10.0.0.8")
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-v", Annotations: carrying(t, entryFor("a", ipA.Name), entryFor("b", ipB.Name))}}
	return &scope{vm: vm, set: set, pods: []corev1.Pod{pod}, owned: []sdnv1.IPAddress{ipA, ipB}, now: t0,
		ipAddresses: map[string]*sdnv1.IPAddress{ipA.Name: &ipA, ipB.Name: &ipB},
		namespace:   &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"env": "prod"}}},
		interfaces: []*iface{{index: 1, spec: vm.Spec.Networks[1], key: "ClusterNetwork/a", dupOf: -1, autoName: ipA.Name, auto: &ipA,
			network: pooled()}}}
}

// removedSet is the shipped default, with the prod sample's hotplug layer when atRestart.
func removedSet(t *testing.T, atRestart bool) *evaluator.Set {
	if !atRestart {
		return compiledSet(t)
	}
	return compiledSet(t, &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "prod"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{Hotplug: &v1alpha1.Expression{Expression: "change.kind == 'None' || !change.vmRunning"}}})
}

func TestARemovedInterfaceStaysOnTheRunningPodUntilRestartWhenHotplugSaysNo(t *testing.T) {
	s := removedScope(t, removedSet(t, true))
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	p := plan(s)
	if got := labels(p.Applied.Live); !equal(got, "ClusterNetwork/a", "ClusterNetwork/b") {
		t.Errorf("running pod's entries = %v, want a and b until the restart", got)
	}
	if got := labels(p.Applied.NextBoot); !equal(got, "ClusterNetwork/a") {
		t.Errorf("next boot = %v, want only a", got)
	}
	if !equal(p.Applied.Held, "ClusterNetwork/b") || len(p.Releasing) != 0 {
		t.Errorf("held = %v releasing = %v, want b held and its IPAddress kept", p.Applied.Held, p.Releasing)
	}
	last := p.Interfaces[len(p.Interfaces)-1]
	if !last.Removed || !last.Attached || last.Decision.Hotplug || last.Decision.Provenance.Hotplug != "prod" {
		t.Errorf("removed interface result = %+v, want removed, still attached, hotplug denied by prod", last)
	}
}

func TestARemovedInterfaceIsUnpluggedAndItsAddressReleasedWhenHotplugAllows(t *testing.T) {
	s := removedScope(t, removedSet(t, false))
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	p := plan(s)
	if got := labels(p.Applied.Live); !equal(got, "ClusterNetwork/a") {
		t.Errorf("running pod's entries = %v, want b hot-unplugged", got)
	}
	if len(p.Applied.Held) != 0 || !equal(p.Releasing, s.owned[1].Name) {
		t.Errorf("held = %v releasing = %v, want nothing held and b's IPAddress released", p.Applied.Held, p.Releasing)
	}
	if s.removed[0].decision.Trace.Matched == nil || s.removed[0].decision.Skip {
		t.Errorf("removed decision = %+v, want the policies asked, never a skip", s.removed[0].decision)
	}
}

// The policy input is built in one place for every front end, and leaves out kubectl's
// last-applied-configuration as the controller's cache does; the VM itself is not changed (it
// may be the cache's object).
func TestThePolicyInputLeavesOutLastAppliedConfiguration(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"kind":"VirtualMachine"}`, "team": "a"}}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "ClusterNetwork", Name: "corp"}}
	s := &scope{vm: vm}
	it := &iface{index: 0, spec: vm.Spec.Networks[0], key: "ClusterNetwork/corp", dupOf: -1, network: &networkInfo{exists: true},
		autoName: naming.AutoIPAddress("v", "ClusterNetwork", "corp")}
	in := input(s, it, nil)
	if _, ok := in.VM.Annotations[corev1.LastAppliedConfigAnnotation]; ok || in.VM.Annotations["team"] != "a" {
		t.Errorf("input annotations %v, want team without last-applied-configuration", in.VM.Annotations)
	}
	if _, ok := vm.Annotations[corev1.LastAppliedConfigAnnotation]; !ok {
		t.Error("building the input removed last-applied-configuration from the VM object")
	}
}

func labels(entries []sdnv1.NetworksSpecEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Type + "/" + e.Name
	}
	return out
}

func equal(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestComputeAfterTheDeadlineIsAnErrorNotAnAnswer: a dry run whose time ran out must not answer
// with decisions cut short (they would be PolicyErrors or missing).
func TestComputeAfterTheDeadlineIsAnErrorNotAnAnswer(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	for i := range 50 {
		vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: "ClusterNetwork", Name: fmt.Sprint("n", i)})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := Compute(ctx, fakeWorld(t), compiledSet(t), vm, Options{Now: t0}); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("Compute after the deadline = %v, %v; want context.Canceled", p, err)
	}
	if p, err := Compute(context.Background(), fakeWorld(t), compiledSet(t), vm, Options{Now: t0}); err != nil || len(p.Interfaces) != 50 {
		t.Errorf("Compute in time = %v, %v; want 50 interfaces", p, err)
	}
}
