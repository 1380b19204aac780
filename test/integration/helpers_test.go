package integration

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// timeout bounds every wait of a spec. It is derived from the product's and the stand-ins' timers:
// the longest a VM's writes may wait for SDN's first answer while SDN is quiet
// (plan.UnansweredGrace; the specs' SDN stand-in answers every address within milliseconds, so the
// longer wait of a backlog, plan.BacklogGrace, does not arise), plus one lapse of the
// virtualization-controller stand-in's expectations, plus a margin for a loaded machine.
const timeout = plan.UnansweredGrace + standInExpectationTTL + 15*time.Second

// interval is how often a wait polls.
const interval = 100 * time.Millisecond

// newNamespace creates a namespace for one spec and returns its name.
func newNamespace(ctx context.Context) string {
	ns := build.Namespace("")
	ns.GenerateName = "it-"
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	// The namespace controller deletes what the spec created, so that no VM of a finished
	// spec keeps the controller busy (and the reconcile counter moving) in later specs.
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), ns))).To(Succeed()) })
	return ns.Name
}

// create creates every object, failing the spec on error.
func create(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8s.Create(ctx, o)).To(Succeed(), "create %T %s", o, o.GetName())
	}
}

// pooledWorld is the usual start of a spec: a context, a namespace of its own and a
// ClusterNetwork named after it with a pool over cidr (restricted to ranges if given).
func pooledWorld(cidr string, ranges ...string) (context.Context, string, string) {
	GinkgoHelper()
	ctx := context.Background()
	ns := newNamespace(ctx)
	return ctx, ns, pooledClusterNetwork(ctx, ns, cidr, ranges...)
}

// pooledClusterNetwork creates a ClusterNetwork named after the spec's namespace with a
// ClusterIPAddressPool over cidr (pooledClusterNetworkNamed), and returns the network's name.
func pooledClusterNetwork(ctx context.Context, ns, cidr string, ranges ...string) string {
	GinkgoHelper()
	return pooledClusterNetworkNamed(ctx, ns+"-corp", cidr, ranges...)
}

// pooledClusterNetworkNamed creates ClusterNetwork name with a ClusterIPAddressPool over cidr
// (the whole CIDR, or ranges), waits until SDN's stand-in reports it Ready, and returns name.
// A spec creating a VM on a network SDN has not made Ready yet sees the interface skipped
// (NetworkNotReady) and hot-plugged later — or, where a policy forbids hotplug, held for a
// restart: specs about something else must not race SDN for it.
func pooledClusterNetworkNamed(ctx context.Context, name, cidr string, ranges ...string) string {
	GinkgoHelper()
	create(ctx, build.ClusterPool(name+"-pool", cidr, ranges...), build.ClusterNetwork(name, name+"-pool"))
	Eventually(func() bool {
		n := &sdnv1.ClusterNetwork{}
		Expect(k8s.Get(ctx, keyOf("", name), n)).To(Succeed())
		return meta.IsStatusConditionTrue(n.Status.Conditions, sdnv1.ConditionReady)
	}, timeout, interval).Should(BeTrue(), "ClusterNetwork %s Ready", name)
	return name
}

func getVM(ctx context.Context, ns, name string) *vmv1.VirtualMachine {
	GinkgoHelper()
	vm := &vmv1.VirtualMachine{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm)).To(Succeed())
	return vm
}

// networkReady returns the VM's NetworkReady condition, or nil.
func networkReady(ctx context.Context, ns, name string) *metav1.Condition {
	return meta.FindStatusCondition(getVM(ctx, ns, name).Status.Conditions, consumer.ConditionNetworkReady)
}

// updateVM applies change to the live VM, retrying on conflicts with the other writer (the
// virtualization-controller stand-in writes the VM too).
func updateVM(ctx context.Context, ns, name string, change func(*vmv1.VirtualMachine)) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vm := getVM(ctx, ns, name)
		change(vm)
		return k8s.Update(ctx, vm)
	})).To(Succeed())
}

// readyOf polls the VM's NetworkReady as "Status/Reason: message".
func readyOf(ctx context.Context, ns, vm string) func() string {
	return func() string { return describe(networkReady(ctx, ns, vm)) }
}

// statusAddress returns status.networks[].ipAddress of the VM's interface on typ/network.
func statusAddress(ctx context.Context, ns, name string, typ vmv1.NetworkType, network string) string {
	for _, n := range getVM(ctx, ns, name).Status.Networks {
		if n.Type == typ && n.Name == network {
			return n.IPAddress
		}
	}
	return ""
}

// launcherPods returns the VM's launcher pods that are not being deleted.
func launcherPods(ctx context.Context, ns, vm string) []corev1.Pod {
	GinkgoHelper()
	var list corev1.PodList
	Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{vmv1.LabelLauncherVMName: vm})).To(Succeed())
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// onePod waits for the VM to have exactly one launcher pod and returns it.
func onePod(ctx context.Context, ns, vm string) corev1.Pod {
	GinkgoHelper()
	var pods []corev1.Pod
	Eventually(func() []corev1.Pod {
		pods = launcherPods(ctx, ns, vm)
		return pods
	}, timeout, interval).Should(HaveLen(1))
	return pods[0]
}

// networksSpec parses an object's networks-spec annotation.
func networksSpec(o client.Object) []sdnv1.NetworksSpecEntry {
	out, err := sdnv1.ParseNetworksSpec(o.GetAnnotations()[sdnv1.AnnotationNetworksSpec])
	Expect(err).NotTo(HaveOccurred())
	return out
}

// podSpecFor returns the pod's networks-spec entry for typ/network, or nil.
func podSpecFor(ctx context.Context, ns, podName, typ, network string) *sdnv1.NetworksSpecEntry {
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, pod); err != nil {
		return nil
	}
	for _, e := range networksSpec(pod) {
		if e.Type == typ && e.Name == network {
			return &e
		}
	}
	return nil
}

// onlyPodEntry polls the networks-spec entry for ClusterNetwork network of the VM's launcher
// pod; nil while the VM has not exactly one pod, or the pod has no such entry.
func onlyPodEntry(ctx context.Context, ns, vm, network string) func() *sdnv1.NetworksSpecEntry {
	return func() *sdnv1.NetworksSpecEntry {
		pods := launcherPods(ctx, ns, vm)
		if len(pods) != 1 {
			return nil
		}
		return podSpecFor(ctx, ns, pods[0].Name, "ClusterNetwork", network)
	}
}

// ipAddresses lists the namespace's IPAddresses.
func ipAddresses(ctx context.Context, ns string) []sdnv1.IPAddress {
	GinkgoHelper()
	var list sdnv1.IPAddressList
	Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

func names(ips []sdnv1.IPAddress) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.Name
	}
	return out
}

func describe(c *metav1.Condition) string {
	if c == nil {
		return "<no condition>"
	}
	return fmt.Sprintf("%s/%s: %s", c.Status, c.Reason, c.Message)
}

// runOperation creates a VirtualMachineOperation and waits until the stand-in completed it.
func runOperation(ctx context.Context, ns, vm string, typ vmv1.OperationType) {
	GinkgoHelper()
	op := &vmv1.VirtualMachineOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: vm + "-"},
		Spec: vmv1.VirtualMachineOperationSpec{Type: typ, VirtualMachineName: vm}}
	Expect(k8s.Create(ctx, op)).To(Succeed())
	Eventually(func() vmv1.OperationPhase {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(op), op)).To(Succeed())
		return op.Status.Phase
	}, timeout, interval).Should(Equal(vmv1.OperationPhaseCompleted))
}

// reconciles is the number of VirtualMachine reconciles this process has run so far, from
// controller-runtime's metrics.
func reconciles() float64 {
	GinkgoHelper()
	return vmControllerMetric("controller_runtime_reconcile_total", "controller")
}

// vmControllerMetric sums the counters or gauges of the metric family name whose label (the
// controller's or the work queue's name) is "virtualmachine", over every manager of the process.
func vmControllerMetric(name, label string) float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == "virtualmachine" {
					total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return total
}

// settled waits until the VM controller is idle: no reconcile running, and neither its work
// queue's depth nor its reconcile count moving over four polls (a second). The depth is
// compared, not required to be 0, because controller-runtime's workqueue gauges are
// process-wide by controller name and a manager a spec stopped leaves its last depth behind.
// Requeues scheduled for later do not count as work; specs that must see them bound reconciles
// over a window. The running count is process-wide too, and every controller start sets it to
// 0: a manager started while another's workers run leaves it below 0 once they finish (seen
// with two replicas and 8 workers), so idle is at most 0, not exactly 0.
func settled() {
	GinkgoHelper()
	var last []string
	Eventually(func() string {
		depth := vmControllerMetric("workqueue_depth", "name")
		active := vmControllerMetric("controller_runtime_active_workers", "controller")
		state := fmt.Sprintf("queue depth %v, %v reconciles running, %v reconciles so far", depth, active, reconciles())
		last = append(last, state)
		if n := len(last); active <= 0 && n >= 4 && last[n-1] == last[n-2] && last[n-2] == last[n-3] && last[n-3] == last[n-4] {
			return "settled"
		}
		return state
	}, 2*timeout, 250*time.Millisecond).Should(Equal("settled"), "the VM controller does not settle")
}

// condition returns the VM's condition of the given type, or nil.
func condition(ctx context.Context, ns, name, typ string) *metav1.Condition {
	return meta.FindStatusCondition(getVM(ctx, ns, name).Status.Conditions, typ)
}

func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// recordOf returns the VM's decision record, nil when there is none.
func recordOf(ctx context.Context, ns, name string) *v1alpha1.VirtualMachineIPAM {
	GinkgoHelper()
	rec := &v1alpha1.VirtualMachineIPAM{}
	if err := k8s.Get(ctx, keyOf(ns, name), rec); err != nil {
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "get record %s/%s: %v", ns, name, err)
		return nil
	}
	return rec
}

// nextBoot is the networks-spec the VM's next launcher pod gets from its virtualization
// controller: what the consumer package makes of its record for a start.
func nextBoot(ctx context.Context, ns, name string) []sdnv1.NetworksSpecEntry {
	GinkgoHelper()
	vm := getVM(ctx, ns, name)
	in := consumer.Input{UID: vm.UID, Generation: vm.Generation, Record: recordOf(ctx, ns, name)}
	for _, n := range vm.Spec.Networks {
		if n.Type != vmv1.NetworkTypeMain {
			in.Networks = append(in.Networks, consumer.Network{Type: string(n.Type), Name: n.Name})
		}
	}
	return consumer.Apply(in).NextBoot
}

// appliedNow reports whether the VM's record decides its current generation and the
// virtualization controller (its stand-in) has applied that record: what the VM shows then
// follows vmipam's decision for its spec as it is.
func appliedNow(ctx context.Context, ns, name string) bool {
	GinkgoHelper()
	vm := getVM(ctx, ns, name)
	rec := recordOf(ctx, ns, name)
	return rec != nil && rec.Spec.VMUID == vm.UID && rec.Spec.VMGeneration == vm.Generation &&
		rec.Status.ObservedGeneration == rec.Generation
}

// waitApplied waits until appliedNow.
func waitApplied(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Eventually(func() bool { return appliedNow(ctx, ns, name) }, timeout, interval).Should(BeTrue(),
		"the record of %s/%s decides its generation and is applied", ns, name)
}

// attachedIn is the IPAddress the VM's record attaches on network typ/name, "" when it attaches
// none there: what a stopped VM gets at its next start (its status shows no address while it
// does not run, as the virtualization controller shows none).
func attachedIn(ctx context.Context, ns, vm string, typ vmv1.NetworkType, network string) string {
	GinkgoHelper()
	rec := recordOf(ctx, ns, vm)
	if rec == nil {
		return ""
	}
	for _, d := range rec.Spec.Interfaces {
		if d.Attach && !d.Removed && string(d.Type) == string(typ) && d.Name == network {
			return d.IPAddressName
		}
	}
	return ""
}
