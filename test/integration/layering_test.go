package integration

import (
	"context"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// prodSample is samples/policies/prod-changes-at-restart.yaml as shipped (it sets only
// hotplug, for namespaces labelled env=prod), under a name of the spec's own.
func prodSample(ns string) client.Object {
	GinkgoHelper()
	data, err := os.ReadFile("../../samples/policies/prod-changes-at-restart.yaml")
	Expect(err).NotTo(HaveOccurred())
	docs, err := policies.Decode(data)
	Expect(err).NotTo(HaveOccurred())
	Expect(docs).To(HaveLen(1))
	p := &docs[0]
	Expect(p.Spec.Allocation).To(BeNil(), "the sample states only hotplug")
	Expect(p.Spec.SkipRules).To(BeEmpty(), "the sample states only hotplug")
	p.Name = ns + "-" + p.Name
	return p
}

var _ = Describe("Layered policies", func() {
	It("the shrunken prod sample holds back an added and a removed interface of a running VM until the restart, then applies both", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		a := pooledClusterNetwork(ctx, ns, "10.31.0.0/24")
		b := pooledClusterNetworkNamed(ctx, ns+"-b", "10.32.0.0/24")
		autoA, autoB := naming.AutoIPAddress("v", "ClusterNetwork", a), naming.AutoIPAddress("v", "ClusterNetwork", b)

		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(a, "")))
		pod := onePod(ctx, ns, "v")
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", a) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(autoA)))

		By("labelling the namespace env=prod and installing the sample")
		nsObj := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Labels["env"] = "prod"
		Expect(k8s.Update(ctx, nsObj)).To(Succeed())
		policy := prodSample(ns)
		create(ctx, policy)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })
		waitServing(ctx, policy.GetName())

		By("replacing a by b on the running VM")
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].Name = b })
		Eventually(func() string { return describe(condition(ctx, ns, "v", consumer.ConditionAwaitingRestart)) }, timeout, interval).
			Should(Equal("True/ChangesPendingRestart: Changes of these interfaces apply at the next restart: ClusterNetwork/" + b +
				", ClusterNetwork/" + a))
		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "v") }, timeout, interval).
			Should(ConsistOf(HaveField("IPAddressNames", ConsistOf(autoB))), "the VM carries b alone, for the next pod")
		Consistently(func() []sdnv1.NetworksSpecEntry { return networksSpec(podOf(ctx, ns, pod.Name)) }, "2s", interval).
			Should(ConsistOf(HaveField("IPAddressNames", ConsistOf(autoA))), "the running pod keeps a and does not get b")
		Expect(names(ipAddresses(ctx, ns))).To(ContainElement(autoA), "a keeps its address until the restart")

		By("restarting")
		runOperation(ctx, ns, "v", vmv1.OperationRestart)
		fresh := onePod(ctx, ns, "v")
		Expect(fresh.UID).NotTo(Equal(pod.UID))
		Eventually(func() []sdnv1.NetworksSpecEntry { return networksSpec(podOf(ctx, ns, fresh.Name)) }, timeout, interval).
			Should(ConsistOf(HaveField("IPAddressNames", ConsistOf(autoB))), "the new pod gets b and not a")
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).
			ShouldNot(ContainElement(autoA), "a's Auto IPAddress goes with the restart")
		Eventually(func() string { return describe(condition(ctx, ns, "v", consumer.ConditionAwaitingRestart)) },
			timeout, interval).Should(Equal("<no condition>"))
	})
})

// waitServing waits until the policy controller serves the policy's first generation.
func waitServing(ctx context.Context, name string) {
	GinkgoHelper()
	Eventually(func() int64 {
		p := &v1alpha1.ClusterIPAMPolicy{}
		_ = k8s.Get(ctx, client.ObjectKey{Name: name}, p)
		return p.Status.ServingGeneration
	}, timeout, interval).Should(BeNumerically(">=", 1))
}

// podOf reads a pod; a pod that is gone reads as an empty one.
func podOf(ctx context.Context, ns, name string) *corev1.Pod {
	pod := &corev1.Pod{}
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)
	return pod
}
