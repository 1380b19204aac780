package integration

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/index/cacheindex"
	"github.com/vmipam/vmipam/controller/reads"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/build"
)

// The controller's indexes answer the cache reader's lookups (client.MatchingFields, with
// and without a namespace) with one key per value: controller-runtime's own IndexField keys
// every value twice, namespaced and across namespaces, and those sets were a quarter of the
// controller's heap at 10,000 VMs. Only a ClusterNetwork reference is looked up across
// namespaces.
var _ = Describe("The controller's cache indexes", func() {
	It("answer namespaced and ClusterNetwork lookups and key namespaced values once (TestCacheIndexerAnswersTheCacheReader)", func() {
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		a, b := newNamespace(ctx), newNamespace(ctx)
		create(ctx,
			build.VM(a, "one", build.OnClusterNetwork("shared-idx", ""), build.OnNetwork("lan", "one-ip")),
			build.VM(b, "two", build.OnClusterNetwork("shared-idx", ""), build.OnNetwork("lan", "")))

		c, err := cache.New(testEnv.Config, cache.Options{Scheme: scheme, ByObject: reads.CacheOptions().ByObject})
		Expect(err).NotTo(HaveOccurred())
		Expect(index.Setup(ctx, cacheindex.Indexer{Cache: c})).To(Succeed())
		go func() { _ = c.Start(ctx) }()
		Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

		vmNames := func(opts ...client.ListOption) []string {
			var list vmv1.VirtualMachineList
			Expect(c.List(ctx, &list, opts...)).To(Succeed())
			var out []string
			for _, vm := range list.Items {
				if vm.Namespace == a || vm.Namespace == b {
					out = append(out, vm.Namespace+"/"+vm.Name)
				}
			}
			return out
		}
		Eventually(func() []string {
			return vmNames(client.MatchingFields{index.VMNetwork: index.NetworkKey(sdnv1.KindClusterNetwork, "shared-idx")})
		}, timeout, interval).Should(ConsistOf(a+"/one", b+"/two"), "a ClusterNetwork's VMs, across namespaces")
		Expect(vmNames(client.InNamespace(a), client.MatchingFields{index.VMNetwork: index.NetworkKey(sdnv1.KindNetwork, "lan")})).
			To(ConsistOf(a+"/one"), "a Network's VMs, in its namespace")
		Expect(vmNames(client.InNamespace(a), client.MatchingFields{index.VMIPAddressName: "one-ip"})).To(ConsistOf(a + "/one"))
		Expect(vmNames(client.InNamespace(b), client.MatchingFields{index.VMIPAddressName: "one-ip"})).To(BeEmpty())

		informer, err := c.GetInformer(ctx, &vmv1.VirtualMachine{})
		Expect(err).NotTo(HaveOccurred())
		keys := informer.(toolscache.SharedIndexInformer).GetIndexer().ListIndexFuncValues("field:" + index.VMNetwork)
		var across []string
		for _, k := range keys {
			if strings.HasPrefix(k, "__all_namespaces/") {
				across = append(across, k)
			}
		}
		Expect(across).To(ContainElement("__all_namespaces/ClusterNetwork/shared-idx"))
		Expect(keys).NotTo(ContainElement(And(HaveSuffix("/ClusterNetwork/shared-idx"), Not(HavePrefix("__all_namespaces/")))),
			"a ClusterNetwork reference is keyed across namespaces only")
		Expect(across).NotTo(ContainElement(ContainSubstring("Network/lan")), "a namespaced Network is keyed in its namespace only")
		Expect(informer.(toolscache.SharedIndexInformer).GetIndexer().ListIndexFuncValues("field:" + index.VMIPAddressName)).
			To(And(ContainElement(a+"/one-ip"), Not(ContainElement("__all_namespaces/one-ip"))))

		By("a VM's own IPAddresses are found through their bucket, keyed across namespaces only")
		one := &vmv1.VirtualMachine{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: a, Name: "one"}, one)).To(Succeed())
		owned := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "one-owned"},
			Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto,
				NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: "shared-idx"}}}
		Expect(controllerutil.SetControllerReference(one, owned, scheme)).To(Succeed())
		create(ctx, owned)
		Eventually(func() ([]sdnv1.IPAddress, error) {
			return index.OwnedIPAddresses(ctx, c, a, one.UID)
		}, timeout, interval).Should(ConsistOf(HaveField("Name", "one-owned")))
		Expect(index.OwnedIPAddresses(ctx, c, b, one.UID)).To(BeEmpty(), "the same owner UID in another namespace owns nothing there")
		ipInformer, err := c.GetInformer(ctx, &sdnv1.IPAddress{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ipInformer.(toolscache.SharedIndexInformer).GetIndexer().ListIndexFuncValues("field:"+index.IPAddressOwnerBucket)).
			To(HaveEach(HavePrefix("__all_namespaces/")), "a bucket is keyed once, across namespaces")
	})
})
