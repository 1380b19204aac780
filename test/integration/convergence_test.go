package integration

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/sim/sdn"
)

var _ = Describe("Convergence under late objects and churn", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	It("converges when the network is created after the VM, without touching the VM", func() {
		net := ns + "-late"
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(net, "")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(ContainSubstring(": NetworkNotFound: ClusterNetwork " + net + " does not exist"))
		generation := getVM(ctx, ns, "v").Generation

		pooledClusterNetworkNamed(ctx, net, "10.5.0.0/24")
		Eventually(func() string { return statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, net) },
			timeout, interval).ShouldNot(BeEmpty())
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(HavePrefix("True/"))
		Expect(getVM(ctx, ns, "v").Generation).To(Equal(generation))
	})

	It("converges when the network becomes Ready later", func() {
		net := ns + "-slow"
		create(ctx, build.ClusterPool(net+"-pool", "10.6.0.0/24"))
		n := build.ClusterNetwork(net, net+"-pool")
		n.Annotations = map[string]string{sdn.AnnotationHoldNotReady: "true"}
		create(ctx, n)
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(net, "")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(ContainSubstring(": NetworkNotReady: ClusterNetwork " + net + " is not Ready"))

		Expect(k8s.Patch(ctx, n, client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"`+sdn.AnnotationHoldNotReady+`":null}}}`)))).To(Succeed())
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(HavePrefix("True/"))
		Expect(statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, net)).NotTo(BeEmpty())
	})

	It("turns an L2-only interface into an Auto one when its network is recreated with a pool", func() {
		net := ns + "-l2"
		n := build.ClusterNetwork(net, "")
		create(ctx, n, build.ClusterPool(net+"-pool", "10.7.0.0/24"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(net, "")))
		pod := onePod(ctx, ns, "v")
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", net) },
			timeout, interval).Should(HaveField("IPAddressNames", BeEmpty()))

		// SDN refuses to change spec.ipam: a network gets a pool by being deleted and created again.
		Expect(k8s.Patch(ctx, n, client.RawPatch("application/merge-patch+json", []byte(
			`{"spec":{"ipam":{"ipAddressPoolRef":{"kind":"ClusterIPAddressPool","name":"`+net+`-pool"}}}}`)))).To(
			MatchError(ContainSubstring("spec.ipam is immutable")))
		Expect(k8s.Delete(ctx, n)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(n), &sdnv1.ClusterNetwork{}))
		}, timeout, interval).Should(BeTrue())
		create(ctx, build.ClusterNetwork(net, net+"-pool"))
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", net) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(naming.AutoIPAddress("v", "ClusterNetwork", net))))
		// The pool's first host: SDN withholds no gateway (10.7.0.2 before issue 28).
		Eventually(func() string { return statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, net) },
			timeout, interval).Should(Equal("10.7.0.1"))
	})

	It("ends with exactly one live Auto IPAddress after removing and re-adding a network ten times", func() {
		corp := pooledClusterNetwork(ctx, ns, "10.8.0.0/24")
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(func() []sdnv1.IPAddress { return ipAddresses(ctx, ns) }, timeout, interval).Should(HaveLen(1))
		for range 10 {
			updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
			updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) {
				vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: corp})
			})
		}
		live := func() []string {
			var out []string
			for _, ip := range ipAddresses(ctx, ns) {
				if ip.DeletionTimestamp == nil {
					out = append(out, ip.Name)
				}
			}
			return out
		}
		// The controller may still work through the twenty edits: wait until NetworkReady speaks of
		// the final spec before judging the IPAddresses.
		Eventually(func() bool {
			vm := getVM(ctx, ns, "v")
			c := meta.FindStatusCondition(vm.Status.Conditions, consumer.ConditionNetworkReady)
			return c != nil && c.ObservedGeneration == vm.Generation && c.Status == metav1.ConditionTrue
		}, timeout, interval).Should(BeTrue(), "NetworkReady=True for the VM's final generation")
		auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		Eventually(live, timeout, interval).Should(ConsistOf(auto))
		Expect(getIPAddress(ctx, ns, auto).Status.Address).NotTo(BeEmpty())
		Expect(statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal(getIPAddress(ctx, ns, auto).Status.Address))
		Consistently(live, "2s", interval).Should(ConsistOf(auto))
	})

	It("survives odd input the API server accepts and reports what it cannot use", func() {
		corp := pooledClusterNetwork(ctx, ns, "10.9.0.0/24")
		long := strings.Repeat("n", 253)
		create(ctx, build.Network(ns, corp, "")) // a Network with the ClusterNetwork's name
		create(ctx, build.VM(ns, "dup", build.OnClusterNetwork(corp, ""), build.OnClusterNetwork(corp, "")))
		create(ctx, build.VM(ns, "same-name", build.OnClusterNetwork(corp, ""), build.OnNetwork(corp, "")))
		create(ctx, build.VM(ns, "long", build.OnClusterNetwork(long, ""), build.OnClusterNetwork(corp, "")))

		Eventually(readyOf(ctx, ns, "dup"), timeout, interval).Should(Equal(fmt.Sprintf(
			"False/NetworkNotReady: ClusterNetwork/%s: DuplicateInterface: spec.networks[2] repeats spec.networks[1]", corp)))
		Eventually(readyOf(ctx, ns, "same-name"), timeout, interval).Should(HavePrefix("True/"), "Network x and ClusterNetwork x do not collide")
		Expect(statusAddress(ctx, ns, "same-name", vmv1.NetworkTypeClusterNetwork, corp)).NotTo(BeEmpty())
		Expect(statusAddress(ctx, ns, "same-name", vmv1.NetworkTypeNetwork, corp)).To(BeEmpty(), "that Network has no pool")
		Eventually(readyOf(ctx, ns, "long"), timeout, interval).Should(ContainSubstring("ClusterNetwork/" + long + ": NetworkNotFound"))
		// NetworkNotFound is in the status from the first reconcile on; the other interface's
		// address comes with SDN's answer, possibly in a later status write.
		Eventually(func() string { return statusAddress(ctx, ns, "long", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).ShouldNot(BeEmpty(), "the other interface works")
		Expect(names(ipAddresses(ctx, ns))).To(ConsistOf(
			naming.AutoIPAddress("dup", "ClusterNetwork", corp),
			naming.AutoIPAddress("same-name", "ClusterNetwork", corp),
			naming.AutoIPAddress("long", "ClusterNetwork", corp)))

		By("a network name that could forge NetworkReady items is quoted in the condition")
		forged := "corp: Attached; ClusterNetwork/db: NetworkNotFound: ok\nline2\u202e"
		create(ctx, build.VM(ns, "forged", build.OnClusterNetwork(forged, "")))
		Eventually(readyOf(ctx, ns, "forged"), timeout, interval).Should(And(
			HavePrefix("False/NetworkNotReady: ClusterNetwork/"+evaluator.QuoteName(forged)+": NetworkNotFound: "),
			Not(ContainSubstring("; ")), Not(ContainSubstring("\n")), Not(ContainSubstring("\u202e"))))

		By("what the CRD schema rejects stays rejected")
		raw := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": vmv1.GroupVersion.String(), "kind": "VirtualMachine",
			"metadata": map[string]any{"name": "bad", "namespace": ns},
			"spec":     map[string]any{"networks": []any{map[string]any{"type": "ClusterNetwork", "name": ""}}},
		}}
		Expect(k8s.Create(ctx, raw)).NotTo(Succeed(), "an empty network name violates minLength")
		bad := build.VM(ns, "bad", func(vm *vmv1.VirtualMachine) {
			vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: "Bogus", Name: "x"})
		})
		Expect(k8s.Create(ctx, bad)).NotTo(Succeed(), "an unknown type violates the enum")
	})
})
