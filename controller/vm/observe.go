package vm

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// scope is everything one reconcile knows about a VM; observe fills it, decide and act read it.
type scope struct {
	vm        *vmv1.VirtualMachine
	namespace *corev1.Namespace // nil if not found
	// interfaces are the additional (non-Main) entries of spec.networks, in spec order.
	interfaces []*iface
	// removed are the interfaces the applied networks-spec carries and the spec no longer
	// names (index -1), each with the decision whether its removal may be hot-unplugged.
	removed []*iface
	// owned are the IPAddresses whose controller is this VM.
	owned []sdnv1.IPAddress
	// pods are the VM's active launcher pods (not terminating, not finished).
	pods []corev1.Pod
	set  *evaluator.Set
	// now is when the world was observed.
	now time.Time
	// pending lists the interfaces ("<Type>/<name>") whose change a running pod does not get
	// because the decision forbids hotplug; filled by act.
	pending []string
}

// iface is one additional interface through the reconcile.
type iface struct {
	index    int
	spec     vmv1.NetworksSpec
	key      string // "<Type>/<name>", unique per VM
	dupOf    int    // index of the first entry with the same key, or -1
	network  *networkInfo
	autoName string           // deterministic name of this interface's Auto IPAddress
	auto     *sdnv1.IPAddress // the object named autoName, if any (ours or not)
	static   *sdnv1.IPAddress // the IPAddress named by ipAddressName, if any
	holders  evaluator.Holders
	decision evaluator.Decision
	// problem, when set, is why the interface is not attached (from the decision or act).
	problem *problem
	// kept: the problem is transient and the VM or a running pod keeps the interface
	// attached as it was (set by plan).
	kept bool
}

// problem is one NetworkReady item.
type problem struct {
	reason  string
	message string
}

type networkInfo struct {
	exists bool
	ready  bool
	pool   *sdnv1.PoolRef
	labels map[string]string
}

// observer reads a VM's world; the reconciler reads from the cache, the dry-run endpoint from
// the cache with the request's objects overlaid.
type observer struct {
	reader client.Reader
	// now is the time of the observation.
	now time.Time
}

// observe gathers everything the decisions and the plan need about vm.
func (r observer) observe(ctx context.Context, vm *vmv1.VirtualMachine, set *evaluator.Set) (*scope, error) {
	s := &scope{vm: vm, set: set, now: r.now}
	steps := []func(context.Context, *scope) error{
		r.observeNamespace, r.observeInterfaces, r.observeOwned, r.observePods,
	}
	for _, step := range steps {
		if err := step(ctx, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (r observer) observeNamespace(ctx context.Context, s *scope) error {
	ns := &corev1.Namespace{}
	err := r.reader.Get(ctx, types.NamespacedName{Name: s.vm.Namespace}, ns)
	switch {
	case err == nil:
		s.namespace = ns
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get namespace: %w", err)
	}
	return nil
}

func (r observer) observeInterfaces(ctx context.Context, s *scope) error {
	seen := map[string]int{}
	for i, spec := range s.vm.Spec.Networks {
		if spec.Type == vmv1.NetworkTypeMain {
			continue
		}
		it := &iface{index: i, spec: spec, key: index.NetworkKey(string(spec.Type), spec.Name), dupOf: -1,
			autoName: naming.AutoIPAddress(s.vm.Name, string(spec.Type), spec.Name)}
		if first, dup := seen[it.key]; dup {
			it.dupOf = first
		} else {
			seen[it.key] = i
		}
		if err := r.observeInterface(ctx, s, it); err != nil {
			return fmt.Errorf("spec.networks[%d] (%s): %w", i, it.key, err)
		}
		s.interfaces = append(s.interfaces, it)
	}
	return nil
}

func (r observer) observeInterface(ctx context.Context, s *scope, it *iface) error {
	var err error
	if it.network, err = r.network(ctx, s.vm.Namespace, it.spec); err != nil {
		return err
	}
	if it.auto, err = r.ipAddress(ctx, s.vm.Namespace, it.autoName); err != nil {
		return err
	}
	if it.spec.IPAddressName == "" {
		return nil
	}
	if it.static, err = r.ipAddress(ctx, s.vm.Namespace, it.spec.IPAddressName); err != nil {
		return err
	}
	it.holders, err = r.holders(ctx, s.vm, it.spec)
	return err
}

func (r observer) network(ctx context.Context, namespace string, spec vmv1.NetworksSpec) (*networkInfo, error) {
	var (
		obj    client.Object
		netw   *sdnv1.NetworkSpec
		status *sdnv1.NetworkStatus
	)
	switch spec.Type {
	case vmv1.NetworkTypeNetwork:
		n := &sdnv1.Network{}
		obj, netw, status = n, &n.Spec, &n.Status
	case vmv1.NetworkTypeClusterNetwork:
		n := &sdnv1.ClusterNetwork{}
		obj, netw, status = n, &n.Spec, &n.Status
		namespace = ""
	default:
		return &networkInfo{}, nil
	}
	if spec.Name == "" {
		return &networkInfo{}, nil
	}
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: spec.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return &networkInfo{}, nil
		}
		return nil, fmt.Errorf("get %s %s: %w", spec.Type, spec.Name, err)
	}
	return &networkInfo{exists: true, pool: netw.PoolRef(), labels: obj.GetLabels(),
		ready: meta.IsStatusConditionTrue(status.Conditions, sdnv1.ConditionReady)}, nil
}

// ipAddress returns the IPAddress of that name, or nil when there is none.
func (r observer) ipAddress(ctx context.Context, namespace, name string) (*sdnv1.IPAddress, error) {
	ip := &sdnv1.IPAddress{}
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, ip); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get IPAddress %s: %w", name, err)
	}
	return ip, nil
}

func (r observer) observeOwned(ctx context.Context, s *scope) error {
	var list sdnv1.IPAddressList
	if err := r.reader.List(ctx, &list, client.InNamespace(s.vm.Namespace),
		client.MatchingFields{index.IPAddressOwnerUID: string(s.vm.UID)}); err != nil {
		return fmt.Errorf("list owned IPAddresses: %w", err)
	}
	s.owned = list.Items
	return nil
}

func (r observer) observePods(ctx context.Context, s *scope) error {
	pods, err := r.activePods(ctx, s.vm.Namespace, s.vm.Name)
	s.pods = pods
	return err
}

// activePods returns the VM's launcher pods that are neither terminating nor finished,
// oldest first.
func (r observer) activePods(ctx context.Context, namespace, vm string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index.PodVM: vm}); err != nil {
		return nil, fmt.Errorf("list launcher pods of %s: %w", vm, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if active(&p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return out, nil
}

// active: a launcher pod that is neither terminating nor finished.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
