package plan

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// scope is everything one reconcile knows about a VM; observe fills it, decide and plan read it.
type scope struct {
	vm        *vmv1.VirtualMachine
	namespace *corev1.Namespace // nil if not found
	// record is the VM's VirtualMachineIPAM as observed, nil when there is none; it may be an
	// earlier VM's of the same name (another spec.vmUID).
	record *v1alpha1.VirtualMachineIPAM
	// nextStart, when set, stands for what a stopped VM's next start gets instead of record:
	// the record this reconcile is about to write (Compute's second pass).
	nextStart *v1alpha1.VirtualMachineIPAM
	// interfaces are the additional (non-Main) entries of spec.networks, in spec order.
	interfaces []*iface
	// removed are the interfaces the running pod carries and the spec no longer names (index
	// -1), each with the decision whether its removal may be hot-unplugged.
	removed []*iface
	// owned are the IPAddresses whose controller is this VM.
	owned []sdnv1.IPAddress
	// pods are the VM's active launcher pods (not terminating, not finished), oldest first.
	pods []corev1.Pod
	// terminating are the VM's launcher pods being deleted but not finished: their guests may
	// still be shutting down on the addresses they carry, so those are still in use.
	terminating []corev1.Pod
	// ipAddresses are the IPAddresses observed by name — each interface's Auto one, its static
	// one and the one its applied entry carries —, nil for a name that does not exist.
	ipAddresses map[string]*sdnv1.IPAddress
	set         *evaluator.Set
	// now is when the world was observed.
	now time.Time
	// sdnLastAnswer is Options.SDNLastAnswer.
	sdnLastAnswer func(*sdnv1.IPAddress) time.Time
	// createdOn is Options.Created.
	createdOn func(metav1.Object, time.Time) time.Time
	// budget is the VM's evaluation budget, DefaultVMEvaluationBudget when zero; overBudget
	// says that decide ran out of it (some interfaces got a PolicyError naming it).
	budget     time.Duration
	overBudget bool
	// holdWait is how long until the soonest static handoff that holds an address back from
	// this VM ends (0: none does).
	holdWait time.Duration
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
	// attached is what the record decides the interface carries, nil when it is not attached
	// (set by plan).
	attached *sdnv1.NetworksSpecEntry
}

// problem is one NetworkReady item.
type problem struct {
	reason  string
	message string
}

type networkInfo struct {
	exists bool
	ready  bool
	// answered: SDN has written the network's Ready condition (True or False); until then the
	// network is new to SDN, and its not being Ready says nothing yet (graceLeft).
	answered bool
	// created is when the network was created (createdAt: its creationTimestamp, on the
	// controller's clock), zero for one a dry run brings along.
	created time.Time
	pool    *sdnv1.PoolRef
	typ     string // ClusterNetwork spec.type: VLAN, Access, or "" (unset, or a Network)
	labels  map[string]string
}

// observer reads a VM's world; the reconciler reads from the cache, the dry-run endpoint from
// the cache with the request's objects overlaid.
type observer struct {
	reader client.Reader
	// now is the time of the observation.
	now time.Time
	// sdnLastAnswer is Options.SDNLastAnswer.
	sdnLastAnswer func(*sdnv1.IPAddress) time.Time
	// createdOn is Options.Created.
	createdOn func(metav1.Object, time.Time) time.Time
}

// observe gathers everything the decisions and the plan need about vm.
func (r observer) observe(ctx context.Context, vm *vmv1.VirtualMachine, set *evaluator.Set) (*scope, error) {
	s := &scope{vm: vm, set: set, now: r.now, sdnLastAnswer: r.sdnLastAnswer, createdOn: r.createdOn, ipAddresses: map[string]*sdnv1.IPAddress{}}
	steps := []func(context.Context, *scope) error{ // pods before interfaces: what runs is applied
		r.observeNamespace, r.observeRecord, r.observePods, r.observeInterfaces, r.observeOwned,
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
	applied := appliedEntries(s)
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
		if err := r.observeInterface(ctx, s, it, applied[it.key]); err != nil {
			return fmt.Errorf("spec.networks[%d] (%s): %w", i, it.key, err)
		}
		s.interfaces = append(s.interfaces, it)
	}
	for key, e := range applied { // removed from the spec, still applied: what it carries
		if _, inSpec := seen[key]; inSpec {
			continue
		}
		for _, name := range e.IPAddressNames {
			if _, err := r.ipAddressByName(ctx, s, name); err != nil {
				return fmt.Errorf("%s (removed): %w", key, err)
			}
		}
	}
	return nil
}

// observeInterface reads the interface's network, its Auto IPAddress, the static one it names
// (and who else wants that), and the IPAddress its applied entry carries.
func (r observer) observeInterface(ctx context.Context, s *scope, it *iface, applied sdnv1.NetworksSpecEntry) error {
	var err error
	if it.network, err = r.network(ctx, s.vm.Namespace, it.spec); err != nil {
		return err
	}
	if it.auto, err = r.ipAddressByName(ctx, s, it.autoName); err != nil {
		return err
	}
	for _, name := range applied.IPAddressNames {
		if _, err := r.ipAddressByName(ctx, s, name); err != nil {
			return err
		}
	}
	if it.spec.IPAddressName == "" {
		return nil
	}
	if it.static, err = r.ipAddressByName(ctx, s, it.spec.IPAddressName); err != nil {
		return err
	}
	var wait time.Duration
	it.holders, wait, err = r.holders(ctx, s.vm, it.spec)
	s.holdWait = soonest(s.holdWait, wait)
	return err
}

// soonest returns the shorter of two waits, 0 meaning none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
}

// ipAddressByName returns the IPAddress of that name in the VM's namespace (nil when there is
// none) and records it in s.ipAddresses; a name already observed is not read again.
func (r observer) ipAddressByName(ctx context.Context, s *scope, name string) (*sdnv1.IPAddress, error) {
	if ip, seen := s.ipAddresses[name]; seen {
		return ip, nil
	}
	ip, err := r.ipAddress(ctx, s.vm.Namespace, name)
	if err != nil {
		return nil, err
	}
	s.ipAddresses[name] = ip
	return ip, nil
}

// addressOf is the allocated address of ip, or "" when ip is nil or not allocated.
func addressOf(ip *sdnv1.IPAddress) string {
	if ip == nil || !allocated(ip) {
		return ""
	}
	return ip.Status.Address
}

func (r observer) network(ctx context.Context, namespace string, spec vmv1.NetworksSpec) (*networkInfo, error) {
	var (
		obj    client.Object
		netw   interface{ PoolRef() *sdnv1.PoolRef }
		typ    *sdnv1.ClusterNetworkType // a Network has no type
		status *sdnv1.NetworkStatus
	)
	switch spec.Type {
	case vmv1.NetworkTypeNetwork:
		n := &sdnv1.Network{}
		obj, netw, typ, status = n, &n.Spec, new(sdnv1.ClusterNetworkType), &n.Status
	case vmv1.NetworkTypeClusterNetwork:
		n := &sdnv1.ClusterNetwork{}
		obj, netw, typ, status = n, &n.Spec, &n.Spec.Type, &n.Status
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
	answered, ready := status.Readiness()
	return &networkInfo{exists: true, pool: netw.PoolRef(), typ: string(*typ), labels: obj.GetLabels(),
		ready: ready, answered: answered, created: createdAt(obj, r.now, r.createdOn)}, nil
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

// observeRecord reads the VM's VirtualMachineIPAM.
func (r observer) observeRecord(ctx context.Context, s *scope) error {
	rec := &v1alpha1.VirtualMachineIPAM{}
	switch err := r.reader.Get(ctx, client.ObjectKeyFromObject(s.vm), rec); {
	case err == nil:
		s.record = rec
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get VirtualMachineIPAM: %w", err)
	}
	return nil
}

func (r observer) observeOwned(ctx context.Context, s *scope) error {
	owned, err := index.OwnedIPAddresses(ctx, r.reader, s.vm.Namespace, s.vm.UID)
	if err != nil {
		return fmt.Errorf("list owned IPAddresses: %w", err)
	}
	s.owned = owned
	return nil
}

func (r observer) observePods(ctx context.Context, s *scope) error {
	pods, err := index.LauncherPods(ctx, r.reader, s.vm.Namespace, s.vm.Name)
	if err != nil {
		return fmt.Errorf("list launcher pods of %s: %w", s.vm.Name, err)
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	for _, p := range pods {
		switch {
		case active(&p):
			s.pods = append(s.pods, p)
		case usesAddresses(&p):
			s.terminating = append(s.terminating, p)
		}
	}
	return nil
}

// active: a launcher pod that is neither terminating nor finished.
func active(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && usesAddresses(p)
}

// usesAddresses: a launcher pod that has not finished — a terminating one too, whose guest may
// still be shutting down on its addresses. Deletion and holding decisions count these.
func usesAddresses(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
