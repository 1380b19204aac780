package integration

import (
	"context"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller/naming"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// hostileFixture reads one of evaluator/testdata/hostile (policies the webhook admits that fail
// at run time on every interface: TestHostileFixturesAreAdmittedAndFailAsNamed keeps them so),
// named for the spec and matching only its namespace.
func hostileFixture(file, ns string) *v1alpha1.ClusterIPAMPolicy {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "evaluator", "testdata", "hostile", file))
	Expect(err).NotTo(HaveOccurred())
	p := &v1alpha1.ClusterIPAMPolicy{}
	Expect(yaml.UnmarshalStrict(raw, p)).To(Succeed())
	p.Name = ns + "-" + p.Name
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	return p
}

// "Failure changes nothing applied" (issue #30, docs/PROTECTION.md): a policy that fails at run
// time — stopped by the per-call cost limit, by the deadline, or by a type error — on a running
// VM whose interfaces are attached leaves the guest as it is: the launcher pod keeps both
// addresses, the IPAddresses are neither released nor re-created, the record keeps attaching
// them, and NetworkReady says PolicyError for each interface.
var _ = Describe("A policy that fails at run time on a running VM", func() {
	for _, file := range []string{"cost-limit.yaml", "deadline.yaml", "type-error.yaml"} {
		It("leaves its attached interfaces and addresses untouched and reports PolicyError: "+file, func() {
			ctx, ns, corp := pooledWorld("10.67.0.0/24", "10.67.0.10-10.67.0.40")
			static := pooledClusterNetworkNamed(ctx, ns+"-static", "10.68.0.0/24")
			create(ctx, build.StaticIPAddress(ns, "web-ip", "ClusterNetwork", static, "10.68.0.5"))
			create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, ""), build.OnClusterNetwork(static, "web-ip")))
			auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
			Eventually(onlyPodEntry(ctx, ns, "v", corp), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
			Eventually(onlyPodEntry(ctx, ns, "v", static), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("web-ip")))
			Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(HavePrefix("True/"))
			uids := map[string]types.UID{}
			for _, ip := range ipAddresses(ctx, ns) {
				uids[ip.Name] = ip.UID
			}
			pod := onePod(ctx, ns, "v").UID

			hostile := hostileFixture(file, ns)
			create(ctx, hostile)
			DeferCleanup(func() { Expect(k8s.Delete(context.Background(), hostile)).To(Succeed()) })
			waitServing(ctx, hostile.Name)

			Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(SatisfyAll(
				ContainSubstring("ClusterNetwork/"+corp+": PolicyError"), ContainSubstring("ClusterNetwork/"+static+": PolicyError")))
			Consistently(func() map[string]types.UID {
				out := map[string]types.UID{}
				for _, ip := range ipAddresses(ctx, ns) {
					out[ip.Name] = ip.UID
				}
				return out
			}, "3s", interval).Should(Equal(uids), "no IPAddress released or re-created")
			Expect(onePod(ctx, ns, "v").UID).To(Equal(pod), "the guest was not restarted")
			Expect(onlyPodEntry(ctx, ns, "v", corp)()).To(HaveField("IPAddressNames", ConsistOf(auto)))
			Expect(onlyPodEntry(ctx, ns, "v", static)()).To(HaveField("IPAddressNames", ConsistOf("web-ip")))
			Expect(attachedIn(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal(auto), "the record keeps it attached")
			Expect(attachedIn(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, static)).To(Equal("web-ip"), "the record keeps it attached")
			Expect(statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, static)).To(Equal("10.68.0.5"))
		})
	}
})

// Errors passed over are visible to the operator (issue #29, point 4): a failurePolicy Ignore
// policy that fails on a VM's interface leaves the interface to the other policies, and its
// own status says it fails, where and why.
var _ = Describe("A failurePolicy Ignore policy that fails on some VMs", func() {
	It("says so on its status, naming the VM, the interface and the field", func() {
		ctx, ns, corp := pooledWorld("10.69.0.0/24", "10.69.0.10-10.69.0.40")
		trial := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-trial"},
			Spec: v1alpha1.ClusterIPAMPolicySpec{Priority: 10, FailurePolicy: v1alpha1.FailurePolicyIgnore,
				Match:      v1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
				Allocation: &v1alpha1.Expression{Expression: "vm.labels.team == 'db' ? 'None' : 'Pass'"}}}
		create(ctx, trial)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), trial)).To(Succeed()) })
		waitServing(ctx, trial.Name)
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(HavePrefix("True/"), "the other policies decide the interface")
		Eventually(func() string {
			p := &v1alpha1.ClusterIPAMPolicy{}
			Expect(k8s.Get(ctx, keyOf("", trial.Name), p)).To(Succeed())
			return describe(apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionEvaluatesWithoutErrors))
		}, timeout, interval).Should(SatisfyAll(HavePrefix("False/EvaluationFailed"), ContainSubstring(ns+"/v ClusterNetwork/"+corp),
			ContainSubstring("spec.allocation.expression"), ContainSubstring("failurePolicy Ignore")))
	})
})
