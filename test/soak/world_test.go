package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// The soak's world: one namespace, up to maxVMs VMs, two pooled ClusterNetworks (n2's pool is
// small, so that it fills up and drains) and one without a pool, and static IPAddresses on n1.
const (
	namespace = "soak"
	maxVMs    = 24
	statics   = 5
	netPooled = "soak-n1"
	netSmall  = "soak-n2"
	netL2     = "soak-l2"
	policy    = "soak-policy"
)

// staticName is the name of the k-th static IPAddress; staticIP its address.
func staticName(k int) string { return fmt.Sprintf("s-%d", k) }
func staticIP(k int) string   { return fmt.Sprintf("10.100.0.%d", 25+k) }

// world carries out the operations of the stream, with an admin client straight to the API
// server, and remembers what the invariants need: the decoys it planted.
type world struct {
	c   client.Client
	rng *rand.Rand

	mu     sync.Mutex
	log    []string
	decoys map[string]string // decoy IPAddress → UID of the VM controlling it
}

// setup creates the namespace, the pools and networks and marks the networks Ready.
func (w *world) setup(ctx context.Context) error {
	objs := []client.Object{build.Namespace(namespace),
		build.ClusterPool(netPooled+"-pool", "10.100.0.0/24", "10.100.0.10-10.100.0.29"),
		build.ClusterPool(netSmall+"-pool", "10.101.0.0/24", "10.101.0.10-10.101.0.15"),
		build.ClusterNetwork(netPooled, netPooled+"-pool"), build.ClusterNetwork(netSmall, netSmall+"-pool"),
		build.ClusterNetwork(netL2, "")}
	for _, o := range objs {
		if err := w.c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	for _, n := range []string{netPooled, netSmall, netL2} {
		if err := w.setReady(ctx, n, metav1.ConditionTrue); err != nil {
			return err
		}
	}
	return nil
}

// record appends a line to the operation log.
func (w *world) record(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, fmt.Sprintf("%5d ", len(w.log)+1)+fmt.Sprintf(format, args...))
}

// operation is one kind of step of the stream, with its weight.
type operation struct {
	name   string
	weight int
	do     func(w *world, ctx context.Context) (string, error)
}

var operations = []operation{
	{"create-vm", 10, (*world).createVM},
	{"delete-vm", 3, (*world).deleteVM},
	{"power", 10, (*world).power},
	{"edit-networks", 14, (*world).editNetworks},
	{"create-static", 4, (*world).createStatic},
	{"delete-static", 2, (*world).deleteStatic},
	{"plant-decoy", 1, (*world).plantDecoy},
	{"flap-network", 3, (*world).flapNetwork},
	{"toggle-network", 1, (*world).toggleNetwork},
	{"edit-policy", 2, (*world).editPolicy},
}

// step carries out one operation chosen by the stream and logs it.
func (w *world) step(ctx context.Context) {
	total := 0
	for _, op := range operations {
		total += op.weight
	}
	n := w.rng.IntN(total)
	for _, op := range operations {
		if n -= op.weight; n < 0 {
			what, err := op.do(w, ctx)
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsConflict(err) {
				what += fmt.Sprintf(" (error: %v)", err)
			}
			w.record("%s %s", op.name, what)
			return
		}
	}
}

func (w *world) vmName() string { return fmt.Sprintf("vm-%02d", w.rng.IntN(maxVMs)) }

// interfaceSpec picks an additional interface: Auto on either pooled network, static on n1, L2
// only, or a static name on the pool-less network (NoIPAMPool).
func (w *world) interfaceSpec() vmv1.NetworksSpec {
	switch w.rng.IntN(6) {
	case 0, 1:
		return vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: netPooled}
	case 2:
		return vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: netSmall}
	case 3, 4:
		return vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: netPooled, IPAddressName: staticName(w.rng.IntN(statics))}
	default:
		return vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: netL2}
	}
}

func (w *world) createVM(ctx context.Context) (string, error) {
	name := w.vmName()
	vm := build.VM(namespace, name)
	for range w.rng.IntN(3) {
		vm.Spec.Networks = append(vm.Spec.Networks, w.interfaceSpec())
	}
	if w.rng.IntN(3) == 0 {
		vm.Spec.RunPolicy = vmv1.RunPolicyManual
	}
	return fmt.Sprintf("%s %s %v", name, vm.Spec.RunPolicy, vm.Spec.Networks[1:]), w.c.Create(ctx, vm)
}

func (w *world) deleteVM(ctx context.Context) (string, error) {
	name := w.vmName()
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return name, w.c.Delete(ctx, vm)
}

func (w *world) power(ctx context.Context) (string, error) {
	name := w.vmName()
	typ := []vmv1.OperationType{vmv1.OperationStart, vmv1.OperationStop, vmv1.OperationRestart, vmv1.OperationMigrate}[w.rng.IntN(4)]
	op := &vmv1.VirtualMachineOperation{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: name + "-"},
		Spec: vmv1.VirtualMachineOperationSpec{Type: typ, VirtualMachineName: name}}
	return fmt.Sprintf("%s %s", typ, name), w.c.Create(ctx, op)
}

// editNetworks adds, removes or replaces an additional interface, or switches its
// ipAddressName (Auto ↔ static, one static for another).
func (w *world) editNetworks(ctx context.Context) (string, error) {
	name := w.vmName()
	var what string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vm := &vmv1.VirtualMachine{}
		if err := w.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vm); err != nil {
			return err
		}
		n := len(vm.Spec.Networks) - 1 // additional interfaces
		switch k := w.rng.IntN(4); {
		case k == 0 && n < 3 || n == 0:
			vm.Spec.Networks = append(vm.Spec.Networks, w.interfaceSpec())
			what = "add " + fmt.Sprint(vm.Spec.Networks[len(vm.Spec.Networks)-1])
		case k == 1:
			i := 1 + w.rng.IntN(n)
			what = "remove " + fmt.Sprint(vm.Spec.Networks[i])
			vm.Spec.Networks = slices.Delete(vm.Spec.Networks, i, i+1)
		case k == 2:
			i := 1 + w.rng.IntN(n)
			vm.Spec.Networks[i] = w.interfaceSpec()
			what = fmt.Sprintf("replace [%d] by %v", i, vm.Spec.Networks[i])
		default:
			i := 1 + w.rng.IntN(n)
			if vm.Spec.Networks[i].IPAddressName != "" && w.rng.IntN(2) == 0 {
				vm.Spec.Networks[i].IPAddressName = ""
			} else {
				vm.Spec.Networks[i].IPAddressName = staticName(w.rng.IntN(statics))
			}
			what = fmt.Sprintf("switch [%d] to %q", i, vm.Spec.Networks[i].IPAddressName)
		}
		return w.c.Update(ctx, vm)
	})
	return name + " " + what, err
}

func (w *world) createStatic(ctx context.Context) (string, error) {
	k := w.rng.IntN(statics)
	return staticName(k), w.c.Create(ctx, build.StaticIPAddress(namespace, staticName(k), sdnv1.KindClusterNetwork, netPooled, staticIP(k)))
}

func (w *world) deleteStatic(ctx context.Context) (string, error) {
	k := w.rng.IntN(statics)
	return staticName(k), w.c.Delete(ctx, &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: staticName(k)}})
}

// plantDecoy creates an Auto IPAddress controlled by a VM but not made by vmipam (no interface
// annotation): vmipam must never delete it.
func (w *world) plantDecoy(ctx context.Context) (string, error) {
	name := w.vmName()
	vm := &vmv1.VirtualMachine{}
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vm); err != nil {
		return name, err
	}
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "decoy-" + name + "-",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
			Name: vm.Name, UID: vm.UID, Controller: ptr.To(true)}}},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: netSmall}}}
	if err := w.c.Create(ctx, ip); err != nil {
		return name, err
	}
	w.mu.Lock()
	w.decoys[ip.Name] = string(vm.UID)
	w.mu.Unlock()
	return ip.Name, nil
}

// setReady sets a ClusterNetwork's Ready condition, as SDN would.
func (w *world) setReady(ctx context.Context, name string, status metav1.ConditionStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := &sdnv1.ClusterNetwork{}
		if err := w.c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		meta.SetStatusCondition(&n.Status.Conditions, metav1.Condition{Type: sdnv1.ConditionReady, Status: status, Reason: "Soak"})
		return w.c.Status().Update(ctx, n)
	})
}

func (w *world) flapNetwork(ctx context.Context) (string, error) {
	name := []string{netPooled, netSmall}[w.rng.IntN(2)]
	status := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse}[w.rng.IntN(2)]
	return fmt.Sprintf("%s Ready=%s", name, status), w.setReady(ctx, name, status)
}

// toggleNetwork makes the small network disappear, or appear again.
func (w *world) toggleNetwork(ctx context.Context) (string, error) {
	err := w.c.Delete(ctx, &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: netSmall}})
	if apierrors.IsNotFound(err) {
		if err := w.c.Create(ctx, build.ClusterNetwork(netSmall, netSmall+"-pool")); err != nil {
			return "create " + netSmall, err
		}
		return "create " + netSmall, w.setReady(ctx, netSmall, metav1.ConditionTrue)
	}
	return "delete " + netSmall, err
}

// editPolicy installs, changes or removes a namespace policy: hotplug allowed, hotplug of mode
// changes forbidden, or a generation that does not compile (the last good one keeps serving).
func (w *world) editPolicy(ctx context.Context) (string, error) {
	variant := w.rng.IntN(4)
	if variant == 3 {
		return "delete", w.c.Delete(ctx, &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}})
	}
	hotplug := []string{"true", "change.kind != 'ModeChange'", "change.kind == 'Nonee' && vm.nope"}[variant]
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.ClusterIPAMPolicy{}
		err := w.c.Get(ctx, client.ObjectKey{Name: policy}, p)
		if apierrors.IsNotFound(err) {
			p, err = policies.Builtin()
			if err != nil {
				return err
			}
			p.ObjectMeta = metav1.ObjectMeta{Name: policy}
			p.Spec.Priority = 10
			p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}}
			p.Spec.Hotplug = &v1alpha1.Expression{Expression: hotplug}
			return w.c.Create(ctx, p)
		}
		if err != nil {
			return err
		}
		p.Spec.Hotplug = &v1alpha1.Expression{Expression: hotplug}
		return w.c.Update(ctx, p)
	})
	return "hotplug: " + hotplug, err
}
