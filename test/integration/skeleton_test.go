package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/test/build"
)

var _ = Describe("Auto, Static and L2-only interfaces", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.1.0.0/24", "10.1.0.10-10.1.0.20")
	})

	It("gives an Auto interface one IPAddress of its own and shows the address in status", func() {
		create(ctx, build.VM(ns, "web", build.OnClusterNetwork(corp, "")))
		auto := naming.AutoIPAddress("web", "ClusterNetwork", corp)

		Eventually(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).Should(Equal("10.1.0.10"))
		ips := ipAddresses(ctx, ns)
		Expect(names(ips)).To(ConsistOf(auto))
		vm := getVM(ctx, ns, "web")
		Expect(metav1.IsControlledBy(&ips[0], vm)).To(BeTrue(), "controller ownerReference to the VM")
		Expect(ips[0].Labels).To(HaveKeyWithValue(plan.LabelVMUID, string(vm.UID)))
		Expect(ips[0].Spec.Type).To(Equal(sdnv1.IPAddressTypeAuto))
		Expect(networkReady(ctx, ns, "web").Status).To(Equal(metav1.ConditionTrue))
		pod := onePod(ctx, ns, "web")
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
	})

	It("keeps the same IPAddress and address when the launcher pod is replaced", func() {
		create(ctx, build.VM(ns, "web", build.OnClusterNetwork(corp, "")))
		Eventually(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).ShouldNot(BeEmpty())
		before := ipAddresses(ctx, ns)
		address := statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, corp)
		old := onePod(ctx, ns, "web")

		Expect(k8s.Delete(ctx, &old)).To(Succeed())
		var fresh corev1.Pod
		Eventually(func() bool {
			pods := launcherPods(ctx, ns, "web")
			if len(pods) != 1 || pods[0].UID == old.UID {
				return false
			}
			fresh = pods[0]
			return true
		}, timeout, interval).Should(BeTrue())

		Expect(podSpecFor(ctx, ns, fresh.Name, "ClusterNetwork", corp)).To(HaveField("IPAddressNames",
			ConsistOf(before[0].Name)), "the new pod starts with the VM's networks-spec")
		// The status shows what SDN configured in a running pod (the virtualization controller
		// reads it from the pod's networks-status), so between the new pod's start and SDN's
		// answer it may show none, as on a real cluster; then the same address again. Until
		// SDN has configured the new pod, the status may still be the old pod's (the address)
		// and turn empty a moment later, so the address is awaited only after that.
		Eventually(func() string {
			pod := &corev1.Pod{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(&fresh), pod); err != nil {
				return ""
			}
			return pod.Annotations[sdnv1.AnnotationNetworksStatus]
		}, timeout, interval).Should(ContainSubstring(`"address":"`+address), "SDN configured the new pod with the address")
		Eventually(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).Should(Equal(address))
		Consistently(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, corp) },
			"2s", interval).Should(Equal(address))
		after := ipAddresses(ctx, ns)
		Expect(after).To(HaveLen(1))
		Expect(after[0].UID).To(Equal(before[0].UID))
	})

	It("uses the user's Static IPAddress and never modifies or deletes it", func() {
		create(ctx, build.StaticIPAddress(ns, "db-ip", "ClusterNetwork", corp, "10.1.0.15"))
		create(ctx, build.VM(ns, "db", build.OnClusterNetwork(corp, "db-ip")))
		Eventually(func() string { return statusAddress(ctx, ns, "db", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).Should(Equal("10.1.0.15"))
		static := &sdnv1.IPAddress{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-ip"}, static)).To(Succeed())
		Expect(static.OwnerReferences).To(BeEmpty())
		Expect(static.Labels).To(BeEmpty())
		Expect(names(ipAddresses(ctx, ns))).To(ConsistOf("db-ip"), "no Auto IPAddress for a static interface")

		By("deleting the VM: the static IPAddress stays, untouched")
		Expect(k8s.Delete(ctx, getVM(ctx, ns, "db"))).To(Succeed())
		Eventually(func() []corev1.Pod { return launcherPods(ctx, ns, "db") }, timeout, interval).Should(BeEmpty())
		// What the user wrote stays as written: spec (generation), labels, annotations, owners,
		// finalizers. The status is SDN's: it reports the address no longer Attached once the
		// pod is gone (so the resourceVersion moves, by SDN's hand).
		userPart := func(ip *sdnv1.IPAddress) []any {
			return []any{ip.UID, ip.Generation, ip.Spec, ip.Labels, ip.Annotations, ip.OwnerReferences, ip.Finalizers, ip.DeletionTimestamp}
		}
		Consistently(func() []any {
			ip := &sdnv1.IPAddress{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(static), ip)).To(Succeed())
			return userPart(ip)
		}, "2s", interval).Should(Equal(userPart(static)))
	})

	It("attaches an L2-only interface without ipAssignmentMode", func() {
		create(ctx, build.ClusterNetwork(ns+"-storage", ""))
		create(ctx, build.VM(ns, "backup", build.OnClusterNetwork(ns+"-storage", "")))
		pod := onePod(ctx, ns, "backup")
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", ns+"-storage") },
			timeout, interval).ShouldNot(BeNil())
		e := podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", ns+"-storage")
		Expect(e.IPAssignmentMode).To(BeEmpty())
		Expect(e.IPAddressNames).To(BeEmpty())
		mac := getVM(ctx, ns, "backup").Status.Networks[1].MACAddress
		Expect(mac).NotTo(BeEmpty())
		Expect(e.IfName).To(Equal(consumer.IfName("ClusterNetwork", mac)), "the virtualization controller's name: veth_cn + md5(MAC)")
		Eventually(func() *metav1.Condition { return networkReady(ctx, ns, "backup") }, timeout, interval).
			Should(HaveField("Status", metav1.ConditionTrue))
		Expect(ipAddresses(ctx, ns)).To(BeEmpty())
	})

	It("skips a missing static IPAddress, keeps the others, and hot-plugs it once created", func() {
		create(ctx, build.ClusterNetwork(ns+"-storage", ""))
		create(ctx, build.VM(ns, "late", build.OnClusterNetwork(corp, "late-ip"), build.OnClusterNetwork(ns+"-storage", "")))
		pod := onePod(ctx, ns, "late")
		Eventually(func() string { return describe(networkReady(ctx, ns, "late")) }, timeout, interval).Should(
			Equal("False/NetworkNotReady: ClusterNetwork/" + corp + ": IPAddressNotFound: IPAddress late-ip does not exist in namespace " + ns))
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", ns+"-storage") },
			timeout, interval).ShouldNot(BeNil(), "the other interface works")
		Expect(podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp)).To(BeNil(), "the skipped interface is not attached")

		By("creating the IPAddress: hot-plugged into the same pod")
		create(ctx, build.StaticIPAddress(ns, "late-ip", "ClusterNetwork", corp, "10.1.0.18"))
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("late-ip")))
		Eventually(func() *metav1.Condition { return networkReady(ctx, ns, "late") }, timeout, interval).
			Should(HaveField("Status", metav1.ConditionTrue))
		Expect(statusAddress(ctx, ns, "late", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal("10.1.0.18"))
		pods := launcherPods(ctx, ns, "late")
		Expect(pods).To(HaveLen(1))
		Expect(pods[0].UID).To(Equal(pod.UID), "not restarted")
	})

	It("deletes the Auto IPAddress when the only additional network is removed", func() {
		create(ctx, build.VM(ns, "web", build.OnClusterNetwork(corp, "")))
		Eventually(func() []sdnv1.IPAddress { return ipAddresses(ctx, ns) }, timeout, interval).Should(HaveLen(1))

		updateVM(ctx, ns, "web", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] }) // Main only
		Eventually(func() []sdnv1.IPAddress { return ipAddresses(ctx, ns) }, timeout, interval).Should(BeEmpty())
		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "web") }, timeout, interval).Should(BeEmpty())
	})
})
