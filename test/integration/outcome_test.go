package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// hotplug is asked about the change that will be applied, whoever caused it (issue #29, point
// 1): under the shipped prod sample (no live changes in prod), a change a policy makes — here
// by a label that flips its allocation — waits for the restart like a change of the spec, and
// a converged interface shows no change at all.
var _ = Describe("Hotplug guards the outcome", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.66.0.0/24", "10.66.0.10-10.66.0.40")
		prodNamespace(ctx, ns)
		// The admin's second policy: label ipam=none makes a VM's interfaces L2-only, ipam=auto
		// asks for Auto even where the spec names a static IPAddress.
		byLabel := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-by-label"},
			Spec: v1alpha1.ClusterIPAMPolicySpec{Priority: 50,
				Match: v1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
				Allocation: &v1alpha1.Expression{Expression: "vm.labels[?'ipam'].orValue('') == 'none' ? 'None' : " +
					"vm.labels[?'ipam'].orValue('') == 'auto' ? 'Auto' : 'Pass'"}}}
		create(ctx, byLabel)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), byLabel)).To(Succeed()) })
		waitServing(ctx, byLabel.Name)
	})
	podEntry := func(vm string) func() *sdnv1.NetworksSpecEntry { return onlyPodEntry(ctx, ns, vm, corp) }
	awaiting := func(vm string) func() *metav1.Condition {
		return func() *metav1.Condition { return condition(ctx, ns, vm, consumer.ConditionAwaitingRestart) }
	}
	label := func(vm, value string) {
		updateVM(ctx, ns, vm, func(v *vmv1.VirtualMachine) {
			if value == "" {
				delete(v.Labels, "ipam")
				return
			}
			if v.Labels == nil {
				v.Labels = map[string]string{}
			}
			v.Labels["ipam"] = value
		})
	}
	// heldUntilRestart: the running guest keeps what it carries (want) while the change waits,
	// and the restart applies it (then).
	heldUntilRestart := func(vm string, want, then types.GomegaMatcher) {
		GinkgoHelper()
		Eventually(awaiting(vm), timeout, interval).ShouldNot(BeNil(), "the policy's change waits for the restart")
		waitApplied(ctx, ns, vm)
		Consistently(podEntry(vm), "2s", interval).Should(want, "the running guest keeps what it has")
		runOperation(ctx, ns, vm, vmv1.OperationRestart)
		Eventually(podEntry(vm), timeout, interval).Should(then)
		Eventually(awaiting(vm), timeout, interval).Should(BeNil())
	}

	It("holds a policy's Auto → None until the restart, and keeps the address until then", func() {
		auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))

		label("v", "none")
		heldUntilRestart("v", HaveField("IPAddressNames", ConsistOf(auto)), HaveField("IPAddressNames", BeEmpty()))
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).ShouldNot(ContainElement(auto),
			"released once the guest let it go")
	})

	It("holds a policy's None → Auto until the restart", func() {
		auto := naming.AutoIPAddress("w", "ClusterNetwork", corp)
		create(ctx, build.VM(ns, "w", build.OnClusterNetwork(corp, ""), build.WithLabels(map[string]string{"ipam": "none"})))
		Eventually(podEntry("w"), timeout, interval).Should(And(Not(BeNil()), HaveField("IPAddressNames", BeEmpty())))

		label("w", "")
		heldUntilRestart("w", HaveField("IPAddressNames", BeEmpty()), HaveField("IPAddressNames", ConsistOf(auto)))
	})

	It("holds the detach of a static address a policy overrules (Static → Auto, which the safety policy refuses) until the restart", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.66.0.33"))
		create(ctx, build.VM(ns, "x", build.OnClusterNetwork(corp, "s")))
		Eventually(podEntry("x"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))

		label("x", "auto")
		heldUntilRestart("x", HaveField("IPAddressNames", ConsistOf("s")), BeNil())
		Expect(recordOf(ctx, ns, "x").Spec.Interfaces[0].Reason).To(Equal("AutoWithIPAddressName"))
	})

	It("shows no change once an interface is what its policy decided: a static name made L2-only is not held forever", func() {
		create(ctx, build.StaticIPAddress(ns, "s2", "ClusterNetwork", corp, "10.66.0.34"))
		create(ctx, build.VM(ns, "y", build.OnClusterNetwork(corp, "s2"), build.WithLabels(map[string]string{"ipam": "none"})))
		Eventually(podEntry("y"), timeout, interval).Should(And(Not(BeNil()), HaveField("IPAddressNames", BeEmpty())))
		waitApplied(ctx, ns, "y")
		d := recordOf(ctx, ns, "y").Spec.Interfaces[0]
		Expect(d.Allocation).To(Equal(v1alpha1.AllocationNone))
		Expect(d.Hotplug).To(BeTrue(), "converged: nothing to hold")
		Consistently(awaiting("y"), "2s", interval).Should(BeNil())
	})
})
