package vm

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/index"
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
		s.interfaces = append(s.interfaces, &iface{index: i, spec: spec, key: "ClusterNetwork/" + spec.Name, dupOf: -1,
			network: &networkInfo{exists: true, ready: true, pool: &sdnv1.PoolRef{Kind: "ClusterIPAddressPool", Name: "p"}}})
	}
	return s
}

// A VM with many interfaces spends at most its evaluation budget in one reconcile, not N times
// the per-interface deadline: with a 20 ms deadline every interface takes at least 20 ms, so a
// 50 ms budget is spent within three, and the rest get a PolicyError naming the budget, without
// being evaluated. Before, all ten ran to the deadline.
func TestAVMsInterfacesShareOneEvaluationBudget(t *testing.T) {
	s := manyInterfaces(slowSet(t, 20*time.Millisecond), 10)
	s.budget = 50 * time.Millisecond
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	if !s.overBudget {
		t.Error("overBudget = false, want true")
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

// The reconciler retries a VM whose budget ran out with backoff, not at once.
func TestAVMOverItsBudgetIsRetriedWithBackoff(t *testing.T) {
	r := &Reconciler{}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "v"}}
	first := r.retry(req, &scope{overBudget: true})
	if first.RequeueAfter != exhaustionBaseDelay {
		t.Errorf("first retry after %v, want %v", first.RequeueAfter, exhaustionBaseDelay)
	}
	if r.retry(req, &scope{}).RequeueAfter != 0 {
		t.Error("a VM within its budget is retried")
	}
}

// The dry run (Evaluate) never retries, so the interfaces its VM budget leaves undecided must
// not say "retried with backoff" as the reconciler's do: they say the dry run does not retry.
// Before, both callers shared the reconciler's message.
func TestTheDryRunsBudgetErrorPromisesNoRetry(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "v", Namespace: "ns", UID: "uid-v"}}
	// Each interface takes the 20 ms deadline: the 2 s default budget ends well before 200.
	for i := range 200 {
		vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: "ClusterNetwork", Name: fmt.Sprintf("n%d", i)})
	}
	none := func(client.Object) []string { return nil }
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).
		WithIndex(&corev1.Pod{}, index.PodVM, none).WithIndex(&sdnv1.IPAddress{}, index.IPAddressOwnerUID, none).Build()
	p, err := Evaluate(context.Background(), c, slowSet(t, 20*time.Millisecond), vm, evaluator.Options{})
	if err != nil {
		t.Fatal(err)
	}
	last := p.Interfaces[len(p.Interfaces)-1].Decision
	if !strings.Contains(last.Message, "evaluation budget") || !strings.Contains(last.Message, "the dry run does not retry") ||
		strings.Contains(last.Message, "retried with backoff") {
		t.Errorf("last interface's message = %q, want the VM budget named and that the dry run does not retry", last.Message)
	}
	// The status is what the controller would write: its text, not the dry run's notice.
	// Before, the dry run's notice was in the NetworkReady message too.
	ready := meta.FindStatusCondition(p.Status.Conditions, ConditionNetworkReady)
	if ready == nil || !strings.Contains(ready.Message, errVMBudget.Error()) || strings.Contains(ready.Message, "the dry run does not retry") {
		t.Errorf("NetworkReady = %+v, want the controller's budget text (%q) and not the dry run's", ready, errVMBudget)
	}
}
