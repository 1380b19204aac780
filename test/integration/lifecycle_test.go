package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/test/build"
)

var _ = Describe("VM lifecycle", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.2.0.0/24", "10.2.0.10-10.2.0.11")
	})
	address := func(vm string) func() string {
		return func() string { return statusAddress(ctx, ns, vm, vmv1.NetworkTypeClusterNetwork, corp) }
	}

	It("keeps the IPAddress and address across stop and start, and nobody else gets the address meanwhile", func() {
		create(ctx, build.VM(ns, "a", build.OnClusterNetwork(corp, ""), build.WithRunPolicy(vmv1.RunPolicyAlwaysOnUnlessStoppedManually)))
		Eventually(address("a"), timeout, interval).Should(Equal("10.2.0.10"))
		before := ipAddresses(ctx, ns)

		runOperation(ctx, ns, "a", vmv1.OperationStop)
		Eventually(func() []corev1.Pod { return launcherPods(ctx, ns, "a") }, timeout, interval).Should(BeEmpty())
		Consistently(address("a"), "1s", interval).Should(Equal("10.2.0.10"), "the address shows while stopped")

		create(ctx, build.VM(ns, "b", build.OnClusterNetwork(corp, "")))
		Eventually(address("b"), timeout, interval).Should(Equal("10.2.0.11"))

		runOperation(ctx, ns, "a", vmv1.OperationStart)
		pod := onePod(ctx, ns, "a")
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(naming.AutoIPAddress("a", "ClusterNetwork", corp))))
		Eventually(address("a"), timeout, interval).Should(Equal("10.2.0.10"), "once SDN configured the NIC")
		after := getIPAddress(ctx, ns, before[0].Name)
		Expect(after.UID).To(Equal(before[0].UID))
	})

	It("carries the same networks-spec on both pods of a live migration and keeps the IPAddress", func() {
		create(ctx, build.VM(ns, "m", build.OnClusterNetwork(corp, "")))
		Eventually(address("m"), timeout, interval).ShouldNot(BeEmpty())
		source := onePod(ctx, ns, "m")
		Eventually(func() []sdnv1.NetworksSpecEntry { return networksSpec(getPod(ctx, ns, source.Name)) },
			timeout, interval).ShouldNot(BeEmpty())
		ip := ipAddresses(ctx, ns)[0]

		op := &vmv1.VirtualMachineOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate-m"},
			Spec: vmv1.VirtualMachineOperationSpec{Type: vmv1.OperationMigrate, VirtualMachineName: "m"}}
		create(ctx, op)
		Eventually(func() int { return len(launcherPods(ctx, ns, "m")) }, timeout, interval/2).Should(Equal(2))
		pods := launcherPods(ctx, ns, "m")
		Expect(networksSpec(&pods[0])).To(Equal(networksSpec(&pods[1])), "source and target carry the same networks-spec")

		Eventually(func() []corev1.Pod { return launcherPods(ctx, ns, "m") }, timeout, interval).Should(HaveLen(1))
		Expect(launcherPods(ctx, ns, "m")[0].UID).NotTo(Equal(source.UID), "the target pod remains")
		Expect(ipAddresses(ctx, ns)).To(HaveLen(1))
		Expect(ipAddresses(ctx, ns)[0].UID).To(Equal(ip.UID))
		Expect(condition(ctx, ns, "m", consumer.ConditionAwaitingRestart)).To(BeNil())
		Eventually(address("m"), timeout, interval).Should(Equal(ip.Status.Address), "once SDN configured the target")
	})

	It("switches a running VM from Auto to Static live: the Auto IPAddress goes, same pod", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.2.0.11"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(address("v"), timeout, interval).Should(Equal("10.2.0.10"))
		pod := onePod(ctx, ns, "v")

		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "s" })
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(ConsistOf("s"))
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))
		Eventually(address("v"), timeout, interval).Should(Equal("10.2.0.11"))
		Expect(launcherPods(ctx, ns, "v")[0].UID).To(Equal(pod.UID))
	})

	It("switches a running VM from Static to Auto live: a new Auto IPAddress, same pod", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.2.0.11"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "s")))
		Eventually(address("v"), timeout, interval).Should(Equal("10.2.0.11"))
		pod := onePod(ctx, ns, "v")

		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "" })
		auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
		Eventually(address("v"), timeout, interval).Should(Equal("10.2.0.10"))
		Expect(names(ipAddresses(ctx, ns))).To(ConsistOf("s", auto), "the user's IPAddress stays")
		Expect(launcherPods(ctx, ns, "v")[0].UID).To(Equal(pod.UID))
	})

	It("deletes the VM's Auto IPAddresses with it (garbage collector), keeping static and other VMs' ones", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.2.0.11"))
		create(ctx, build.VM(ns, "gone", build.OnClusterNetwork(corp, "")))
		create(ctx, build.VM(ns, "stays", build.OnClusterNetwork(corp, "s")))
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(HaveLen(2))
		Eventually(address("gone"), timeout, interval).ShouldNot(BeEmpty())

		Expect(k8s.Delete(ctx, getVM(ctx, ns, "gone"))).To(Succeed())
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(ConsistOf("s"))
		Consistently(address("stays"), "1s", interval).Should(Equal("10.2.0.11"))
	})
})

func getIPAddress(ctx context.Context, ns, name string) *sdnv1.IPAddress {
	GinkgoHelper()
	ip := &sdnv1.IPAddress{}
	Expect(k8s.Get(ctx, keyOf(ns, name), ip)).To(Succeed())
	return ip
}

func getPod(ctx context.Context, ns, name string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Expect(k8s.Get(ctx, keyOf(ns, name), pod)).To(Succeed())
	return pod
}
