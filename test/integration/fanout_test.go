package integration

import (
	"context"
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
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
		// What vmipam owns of "plain": its decision record, whose spec generation counts every
		// write of vmipam's; the scale suite counts the controller's writes from the audit log.
		owned := func() string {
			rec := recordOf(ctx, ns, "plain")
			spec, err := json.Marshal(rec.Spec)
			Expect(err).NotTo(HaveOccurred())
			return fmt.Sprint(rec.Generation, " ", string(spec))
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

		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "gold") }, timeout, interval).
			Should(ConsistOf(HaveField("IPAddressNames", BeEmpty())))
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(HaveLen(1))
		Consistently(owned, "2s", interval).Should(Equal(before), "the unaffected VM is not changed")
	})
})
