package vm

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// policyFanOut turns a changed policy into the VMs whose decisions it can change: those its
// previous or its new match block selects (namespaceSelector, vmSelector, networks). CEL
// matchConditions cannot be pre-evaluated, so they do not narrow the set. The requests are
// queued as any other change of a VM is (priority 0, in turn with new VMs), not through the
// queue's rate limiter: its token bucket (client-go's default, 10 a second after a burst of
// 100) spread a change over 1,000 VMs across 90 s and over 10,000 across 17 minutes, although a
// re-evaluation that changes nothing writes nothing, and the writes of those that do are
// bounded by the client's QPS and burst (--kube-api-qps, --kube-api-burst) and the workers, as
// every other write is. (A lower priority would let a steady stream of new VMs hold a policy
// change back indefinitely: controller-runtime's priority queue never ages an item up.)
type policyFanOut struct {
	r    *Reconciler
	mu   sync.Mutex
	seen map[string]v1alpha1.Match // policy name → match of the version last seen
}

var _ handler.EventHandler = (*policyFanOut)(nil)

func (f *policyFanOut) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
func (f *policyFanOut) Update(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
func (f *policyFanOut) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// Generic receives the registry's change events; Object is the changed ClusterIPAMPolicy (a
// name-only object when the policy was removed).
func (f *policyFanOut) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	p, ok := e.Object.(*v1alpha1.ClusterIPAMPolicy)
	if !ok {
		return
	}
	for _, req := range f.affected(ctx, p) {
		q.Add(req)
	}
}

// affected returns the VMs the previous or the current version of p matches, each once, by
// namespace, then name.
func (f *policyFanOut) affected(ctx context.Context, p *v1alpha1.ClusterIPAMPolicy) []reconcile.Request {
	f.mu.Lock()
	old, hadOld := f.seen[p.Name]
	removed := p.CreationTimestamp.IsZero() && p.Generation == 0
	if removed {
		delete(f.seen, p.Name)
	} else {
		f.seen[p.Name] = p.Spec.Match
	}
	f.mu.Unlock()
	var selectors []matchSelectors
	if hadOld {
		selectors = append(selectors, parseMatch(old))
	}
	if !removed && !(hadOld && equality.Semantic.DeepEqual(old, p.Spec.Match)) {
		selectors = append(selectors, parseMatch(p.Spec.Match))
	}
	lists, err := f.candidates(ctx, selectors)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing VirtualMachines after a policy change; they are not re-evaluated", "policy", p.Name)
		return nil
	}
	nsLabels := map[string]labels.Set{}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for _, vms := range lists {
		for i := range vms {
			vm := &vms[i]
			key := client.ObjectKeyFromObject(vm)
			if seen[key] {
				continue
			}
			seen[key] = true
			if slices.ContainsFunc(selectors, func(m matchSelectors) bool { return f.matches(ctx, m, vm, nsLabels) }) {
				out = append(out, reconcile.Request{NamespacedName: key})
			}
		}
	}
	slices.SortFunc(out, func(a, b reconcile.Request) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// candidates lists the VMs the selectors' vmSelectors select, for matches to narrow down: one
// list per selector, which the cache builds with the selector applied, so a policy for a few
// VMs among 10,000 costs a label test of each, not a copy of each into the list (~80 ms at
// 10,000 VMs, which a policy change waited for before its first reconcile: round 13); or one
// list of every VM when a selector has no vmSelector (it needs them all anyway). The objects
// are only read: the cache's own, not a deep copy. A VM may be in more than one list.
func (f *policyFanOut) candidates(ctx context.Context, selectors []matchSelectors) ([][]vmv1.VirtualMachine, error) {
	var byLabels []labels.Selector
	for _, m := range selectors {
		if m.vms == nil {
			byLabels = []labels.Selector{nil}
			break
		}
		byLabels = append(byLabels, m.vms)
	}
	out := make([][]vmv1.VirtualMachine, 0, len(byLabels))
	for _, sel := range byLabels {
		opts := []client.ListOption{client.UnsafeDisableDeepCopy}
		if sel != nil {
			opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
		}
		var list vmv1.VirtualMachineList
		if err := f.r.Client.List(ctx, &list, opts...); err != nil {
			return nil, err
		}
		out = append(out, list.Items)
	}
	return out, nil
}

// matchSelectors is a policy's match block with its label selectors parsed, once per fan-out
// instead of once per VM.
type matchSelectors struct {
	vms, namespaces labels.Selector // nil: no selector
	networks        []v1alpha1.NetworkSelector
}

// parseMatch parses m's selectors. A selector that does not parse selects everything: the
// policy's compile status reports it, and re-evaluating too many VMs is only slower, never
// wrong.
func parseMatch(m v1alpha1.Match) matchSelectors {
	return matchSelectors{vms: selector(m.VMSelector), namespaces: selector(m.NamespaceSelector), networks: m.Networks}
}

// selector is s as a labels.Selector: nil for no selector, labels.Everything() for one that
// does not parse.
func selector(s *metav1.LabelSelector) labels.Selector {
	if s == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Everything()
	}
	return sel
}

// matches reports whether m selects any additional interface of vm.
func (f *policyFanOut) matches(ctx context.Context, m matchSelectors, vm *vmv1.VirtualMachine, nsLabels map[string]labels.Set) bool {
	if m.vms != nil && !m.vms.Matches(labels.Set(vm.Labels)) {
		return false
	}
	if m.namespaces != nil {
		set, ok := nsLabels[vm.Namespace]
		if !ok {
			ns := &corev1.Namespace{}
			if err := f.r.Client.Get(ctx, types.NamespacedName{Name: vm.Namespace}, ns); err == nil {
				set = ns.Labels
			}
			nsLabels[vm.Namespace] = set
		}
		if !m.namespaces.Matches(set) {
			return false
		}
	}
	for _, n := range vm.Spec.Networks {
		if n.Type != vmv1.NetworkTypeMain && networkSelected(m.networks, n) {
			return true
		}
	}
	return false
}

func networkSelected(selectors []v1alpha1.NetworkSelector, n vmv1.NetworksSpec) bool {
	if len(selectors) == 0 {
		return true
	}
	for _, s := range selectors {
		if string(s.Type) == string(n.Type) && (s.Name == "" || s.Name == n.Name) {
			return true
		}
	}
	return false
}
