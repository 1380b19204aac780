package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

var _ = Describe("SDN quiet on a network", func() {
	It("reports the unanswered interface IPAddressPending once UnansweredGrace has passed, with the answered one attached, in one record write", func() {
		ctx, ns, corp := pooledWorld("10.40.0.0/24")
		quiet := pooledClusterNetworkNamed(ctx, ns+"-quiet", "10.41.0.0/24")
		sdnQuietOn(ctx, ns, quiet)

		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, ""), build.OnClusterNetwork(quiet, "")))
		vm := getVM(ctx, ns, "v")
		Eventually(func() *v1alpha1.VirtualMachineIPAM { return recordOf(ctx, ns, "v") }, timeout, interval).ShouldNot(BeNil())
		rec := recordOf(ctx, ns, "v")
		Expect(rec.Spec.Interfaces).To(ConsistOf(
			And(HaveField("Name", corp), HaveField("Attach", true), HaveField("Allocation", v1alpha1.Allocation(evaluator.AllocationAuto))),
			And(HaveField("Name", quiet), HaveField("Attach", false), HaveField("Reason", string(evaluator.ReasonIPAddressPending)))))
		// The record waits for SDN's answer as long as SDN may still give it (one write per VM):
		// both timestamps are the API server's, to the second.
		Expect(rec.CreationTimestamp.Sub(vm.CreationTimestamp.Time)).To(BeNumerically(">=", plan.UnansweredGrace-time.Second),
			"the record is written once SDN had UnansweredGrace to answer, not before")
		Expect(rec.Generation).To(Equal(int64(1)), "one record write: the pending interface is decided with the answered one")

		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(And(HavePrefix("False/"),
			ContainSubstring("ClusterNetwork/"+quiet+": IPAddressPending")))
		Eventually(func() string { return statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, corp) }, timeout, interval).
			Should(HavePrefix("10.40.0."), "the answered interface is not held back by the unanswered one")
	})
})

// sdnQuietOn makes SDN's stand-in quiet on ClusterNetwork network until the spec ends: a
// ValidatingAdmissionPolicy denies every status write of an IPAddress of that network in
// namespace ns, so SDN's answers never land — what vmipam sees when SDN stops serving a
// network. It returns once the API server enforces the policy (a dry-run status write of an
// address SDN answered before is refused).
func sdnQuietOn(ctx context.Context, ns, network string) {
	GinkgoHelper()
	probe := build.StaticIPAddress(ns, "probe", "ClusterNetwork", network, "10.41.0.250")
	create(ctx, probe)
	Eventually(func() string {
		ip := &sdnv1.IPAddress{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(probe), ip)).To(Succeed())
		return ip.Status.Address
	}, timeout, interval).ShouldNot(BeEmpty(), "SDN answers the probe before it goes quiet")

	name := ns + "-sdn-quiet"
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{sdnv1.GroupVersion.Group}, APIVersions: []string{sdnv1.GroupVersion.Version},
						Resources: []string{"ipaddresses/status"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "request.namespace != '" + ns + "' || object.spec.networkRef.name != '" + network + "'",
				Message:    "test: SDN is quiet on ClusterNetwork " + network}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	create(ctx, policy, binding)
	DeferCleanup(func() {
		Expect(k8s.Delete(context.Background(), binding)).To(Succeed())
		Expect(k8s.Delete(context.Background(), policy)).To(Succeed())
	})
	Eventually(func() error { // the API server's policy cache takes a moment
		ip := &sdnv1.IPAddress{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(probe), ip)).To(Succeed())
		patch := []byte(`{"status":{"phase":"Pending"}}`)
		return k8s.Status().Patch(ctx, ip, client.RawPatch(types.MergePatchType, patch), client.DryRunAll)
	}, timeout, interval).Should(MatchError(ContainSubstring("SDN is quiet")))
}
