package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/test/build"
)

// setNetworkReady sets the ClusterNetwork's Ready condition, as SDN would.
func setNetworkReady(ctx context.Context, name string, status metav1.ConditionStatus) {
	GinkgoHelper()
	n := &sdnv1.ClusterNetwork{}
	Expect(k8s.Get(ctx, keyOf("", name), n)).To(Succeed())
	meta.SetStatusCondition(&n.Status.Conditions, metav1.Condition{Type: sdnv1.ConditionReady, Status: status, Reason: "Test"})
	Expect(k8s.Status().Update(ctx, n)).To(Succeed())
}

var _ = Describe("Addresses stay with the guest that uses them", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.40.0.0/24", "10.40.0.10-10.40.0.20")
	})
	podEntry := func(vm string) func() *sdnv1.NetworksSpecEntry { return onlyPodEntry(ctx, ns, vm, corp) }

	It("keeps NICs attached and the holder holding through a network Ready flap", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.40.0.15"))
		create(ctx, build.VM(ns, "older", build.OnClusterNetwork(corp, "")))
		Eventually(readyOf(ctx, ns, "older"), timeout, interval).Should(HavePrefix("True/"))
		create(ctx, build.VM(ns, "holder", build.OnClusterNetwork(corp, "s")))
		Eventually(podEntry("holder"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))
		updateVM(ctx, ns, "older", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "s" })
		Eventually(readyOf(ctx, ns, "older"), timeout, interval).Should(ContainSubstring("IPAddressInUse: IPAddress s is in use by VM holder"))

		setNetworkReady(ctx, corp, metav1.ConditionFalse)
		Eventually(readyOf(ctx, ns, "holder"), timeout, interval).Should(ContainSubstring(": NetworkNotReady: "))
		Consistently(podEntry("holder"), "1s", interval).Should(HaveField("IPAddressNames", ConsistOf("s")),
			"a transient problem does not unplug the NIC")
		setNetworkReady(ctx, corp, metav1.ConditionTrue)

		Eventually(readyOf(ctx, ns, "holder"), timeout, interval).Should(HavePrefix("True/"))
		Eventually(readyOf(ctx, ns, "older"), timeout, interval).Should(ContainSubstring("IPAddressInUse: IPAddress s is in use by VM holder"))
		Expect(podEntry("older")()).To(BeNil())
	})

	It("treats a static IPAddress still on a running pod as held, while the change waits for a restart", func() {
		policy := namespacePolicy(ns, "change.kind != 'ModeChange'")
		create(ctx, policy)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.40.0.15"))
		create(ctx, build.VM(ns, "a", build.OnClusterNetwork(corp, "s")))
		Eventually(podEntry("a"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))

		updateVM(ctx, ns, "a", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "" })
		Eventually(func() *metav1.Condition { return condition(ctx, ns, "a", consumer.ConditionAwaitingRestart) },
			timeout, interval).ShouldNot(BeNil())
		create(ctx, build.VM(ns, "b", build.OnClusterNetwork(corp, "s")))
		Eventually(readyOf(ctx, ns, "b"), timeout, interval).Should(ContainSubstring("IPAddressInUse: IPAddress s is in use by VM a"))
		Consistently(podEntry("b"), "1s", interval).Should(BeNil(), "no second guest gets the address")
	})

	It("keeps the Auto IPAddress a running pod still uses until the restart applies the change", func() {
		policy := namespacePolicy(ns, "change.kind != 'ModeChange'")
		create(ctx, policy)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.40.0.15"))
		create(ctx, build.VM(ns, "a", build.OnClusterNetwork(corp, "")))
		auto := naming.AutoIPAddress("a", "ClusterNetwork", corp)
		Eventually(podEntry("a"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))

		updateVM(ctx, ns, "a", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "s" })
		Eventually(func() *metav1.Condition { return condition(ctx, ns, "a", consumer.ConditionAwaitingRestart) },
			timeout, interval).ShouldNot(BeNil())
		Consistently(func() []string { return names(ipAddresses(ctx, ns)) }, "1s", interval).Should(ConsistOf("s", auto))

		runOperation(ctx, ns, "a", vmv1.OperationRestart)
		Eventually(podEntry("a"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(ConsistOf("s"))
	})

	It("keeps a VM's own Auto IPAddress when the VM names it as static", func() {
		create(ctx, build.VM(ns, "a", build.OnClusterNetwork(corp, "")))
		auto := naming.AutoIPAddress("a", "ClusterNetwork", corp)
		Eventually(podEntry("a"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
		address := getIPAddress(ctx, ns, auto).Status.Address

		updateVM(ctx, ns, "a", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = auto })
		Consistently(func() []string { return names(ipAddresses(ctx, ns)) }, "2s", interval).Should(ConsistOf(auto))
		Expect(readyOf(ctx, ns, "a")()).To(HavePrefix("True/"))
		Expect(statusAddress(ctx, ns, "a", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal(address))
	})
})
