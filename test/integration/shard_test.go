package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/vmipam/vmipam/controller/shard"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/build"
)

// A shard (--namespaces, docs/SCALING.md) is the controller with its cache limited to some
// namespaces: it decides the VMs of those and leaves every other namespace to other shards.
var _ = Describe("A namespace shard", func() {
	It("reconciles the VMs of its namespaces and never writes in another's", func() {
		ctx, mine, corp := pooledWorld("10.9.0.0/24")
		other := newNamespace(ctx)
		stopVMIPAM()
		DeferCleanup(startVMIPAM)
		shard := startManagerWith(vmipamConfig, nil, setupVMIPAM, func(o *ctrl.Options) {
			Expect(shard.LimitToNamespaces(&o.Cache, []string{mine})).To(Succeed())
		})
		DeferCleanup(shard.stop)

		create(ctx, build.VM(other, "theirs", build.OnClusterNetwork(corp, "")))
		create(ctx, build.VM(mine, "ours", build.OnClusterNetwork(corp, "")))
		Eventually(func() string { return statusAddress(ctx, mine, "ours", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).ShouldNot(BeEmpty(), "the shard decides the VMs of its namespace")
		// The VM of the other namespace was created first: had the shard seen it, it would be
		// decided by now. Nothing of it is written while the shard keeps running.
		labelNamespace(ctx, other) // a Namespace event of another shard's namespace enqueues nothing either
		Consistently(func() []sdnv1.IPAddress { return ipAddresses(ctx, other) }, "2s", interval).Should(BeEmpty())
		Expect(recordOf(ctx, other, "theirs")).To(BeNil(), "no decision record in another shard's namespace")
	})

	It("refuses a namespace list with a name that is not a namespace's", func() {
		var o ctrl.Options
		err := shard.LimitToNamespaces(&o.Cache, []string{"good", "Not_A_Namespace"})
		Expect(err).To(MatchError(ContainSubstring(`"Not_A_Namespace"`)))
		Expect(o.Cache.DefaultNamespaces).To(BeNil(), "options left as they were")
	})
})

// labelNamespace adds a label to namespace ns.
func labelNamespace(ctx context.Context, ns string) {
	GinkgoHelper()
	n := build.Namespace(ns)
	Expect(k8s.Get(ctx, keyOf("", ns), n)).To(Succeed())
	metav1.SetMetaDataLabel(&n.ObjectMeta, "vmipam.test/touched", "yes")
	Expect(k8s.Update(ctx, n)).To(Succeed())
}
