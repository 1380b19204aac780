package integration

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

var _ = Describe("Policy changes", func() {
	It("change a running VM's decision and leave the VMs they do not select unchanged (writes are counted per VM in test/scale)", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		corp := pooledClusterNetwork(ctx, ns, "10.50.0.0/24")
		create(ctx, build.VM(ns, "gold", build.OnClusterNetwork(corp, ""), build.WithLabels(map[string]string{"tier": "gold"})))
		create(ctx, build.VM(ns, "plain", build.OnClusterNetwork(corp, "")))
		for _, n := range []string{"gold", "plain"} {
			Eventually(func() string { return statusAddress(ctx, ns, n, vmv1.NetworkTypeClusterNetwork, corp) },
				timeout, interval).ShouldNot(BeEmpty())
		}
		// What vmipam owns on "plain": its networks-spec, status.networks and NetworkReady. The
		// VM-runtime stand-in writes the VM too, so its resourceVersion proves nothing; the
		// scale suite counts the controller's own writes from the audit log.
		owned := func() string {
			vm := getVM(ctx, ns, "plain")
			return fmt.Sprint(vm.Annotations[sdnv1.AnnotationNetworksSpec], vm.Status.Networks,
				meta.FindStatusCondition(vm.Status.Conditions, "NetworkReady"))
		}
		settled()
		before := owned()

		By("a policy that makes gold's interfaces L2 only")
		p := namespacePolicy(ns, "true")
		p.Spec.Match.VMSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
		p.Spec.Allocation = &v1alpha1.Expression{Expression: "'None'"}
		p.Spec.SkipRules = nil
		create(ctx, p)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), p)).To(Succeed()) })

		Eventually(func() []sdnv1.NetworksSpecEntry { return networksSpec(getVM(ctx, ns, "gold")) }, timeout, interval).
			Should(ConsistOf(HaveField("IPAddressNames", BeEmpty())))
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(HaveLen(1))
		Consistently(owned, "2s", interval).Should(Equal(before), "the unaffected VM is not changed")
	})
})
