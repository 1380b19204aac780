package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// namespacePolicy returns a copy of the default policy that governs only namespace ns, with
// the given hotplug expression.
func namespacePolicy(ns, hotplug string) *v1alpha1.ClusterIPAMPolicy {
	GinkgoHelper()
	p, err := policies.Builtin()
	Expect(err).NotTo(HaveOccurred())
	p.ObjectMeta = metav1.ObjectMeta{Name: ns + "-policy"}
	p.Spec.Priority = 10
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	p.Spec.Hotplug = &v1alpha1.Expression{Expression: hotplug}
	return p
}

var _ = Describe("Hotplug policy", func() {
	It("holds a mode change back for the running pod until a restart when the policy forbids hotplug", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		corp := pooledClusterNetwork(ctx, ns, "10.30.0.0/24")
		policy := namespacePolicy(ns, "change.kind != 'ModeChange'")
		create(ctx, policy)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })

		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.30.0.40"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "s")))
		pod := onePod(ctx, ns, "v")
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))

		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "" })
		auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		Eventually(func() string { return describe(condition(ctx, ns, "v", consumer.ConditionAwaitingRestart)) }, timeout, interval).
			Should(Equal("True/ChangesPendingRestart: Changes of these interfaces apply at the next restart: ClusterNetwork/" + corp))
		Expect(nextBoot(ctx, ns, "v")).To(ContainElement(HaveField("IPAddressNames", ConsistOf(auto))),
			"the VM carries the new networks-spec for the next pod")
		Consistently(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, pod.Name, "ClusterNetwork", corp) },
			"1s", interval).Should(HaveField("IPAddressNames", ConsistOf("s")), "the running pod keeps what it has")

		runOperation(ctx, ns, "v", vmv1.OperationRestart)
		fresh := onePod(ctx, ns, "v")
		Expect(fresh.UID).NotTo(Equal(pod.UID))
		Eventually(func() *sdnv1.NetworksSpecEntry { return podSpecFor(ctx, ns, fresh.Name, "ClusterNetwork", corp) },
			timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
		Eventually(func() *metav1.Condition { return condition(ctx, ns, "v", consumer.ConditionAwaitingRestart) },
			timeout, interval).Should(BeNil())
	})
})
