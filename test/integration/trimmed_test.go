package integration

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// vmipam's cache holds trimmed VMs (reads.CacheOptions) and its Go types do not know every
// field of the real CRD; vmipam writes no VM at all, and the virtualization controller (its
// stand-in) writes the whole status by an Update of what it read, as VC does: neither may drop
// a field of the real CRD.
var _ = Describe("Writes keep what the writer does not read", func() {
	It("keeps an unknown status field, a spec field vmipam's cache trims, and others' labels and annotations", func() {
		ctx, ns, corp := pooledWorld("10.62.0.0/24", "10.62.0.10-10.62.0.40")
		vm := build.VM(ns, "keep", build.OnClusterNetwork(corp, ""))
		vm.Labels = map[string]string{"example.com/owner": "team-a"}
		vm.Annotations = map[string]string{"example.com/note": "not vmipam's"}
		vm.Spec.CPU = &apiextensionsv1.JSON{Raw: []byte(`{"cores":2}`)}
		create(ctx, vm)

		By("the virtualization-controller stand-in reports the guest in status.guestOSInfo once the VM runs")
		Eventually(func() any { return unknownStatus(ctx, ns, "keep") }, timeout, interval).Should(Equal(virtualization.GuestOSInfo))
		Eventually(readyOf(ctx, ns, "keep"), timeout, interval).Should(HavePrefix("True/"))

		By("another writer drops NetworkReady, so that the stand-in writes the status again, after the guest info")
		live := getVM(ctx, ns, "keep")
		base := live.DeepCopy()
		meta.RemoveStatusCondition(&live.Status.Conditions, consumer.ConditionNetworkReady)
		Expect(k8s.Status().Patch(ctx, live, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))).To(Succeed())
		Eventually(readyOf(ctx, ns, "keep"), timeout, interval).Should(HavePrefix("True/"))

		got := getVM(ctx, ns, "keep")
		Expect(unknownStatus(ctx, ns, "keep")).To(Equal(virtualization.GuestOSInfo), "the status Update dropped a status field the writer's types do not know")
		Expect(got.Spec.CPU).NotTo(BeNil(), "spec.cpu, which vmipam's cache trims, was dropped")
		Expect(string(got.Spec.CPU.Raw)).To(MatchJSON(`{"cores":2}`))
		Expect(got.Labels).To(HaveKeyWithValue("example.com/owner", "team-a"))
		Expect(got.Annotations).To(HaveKeyWithValue("example.com/note", "not vmipam's"))
		Expect(got.Status.Networks).To(ContainElement(HaveField("MACAddress", Not(BeEmpty()))), "the stand-in's macAddress is kept")
	})
})

// unknownStatus returns status.guestOSInfo of the VM, read as unstructured (the Go type drops
// it), or nil.
func unknownStatus(ctx context.Context, ns, name string) any {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(vmv1.GroupVersion.WithKind("VirtualMachine"))
	Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, u)).To(Succeed())
	v, found, err := unstructured.NestedFieldCopy(u.Object, "status", virtualization.StatusGuestOSInfo)
	Expect(err).NotTo(HaveOccurred())
	if !found {
		return nil
	}
	// Normalize through JSON, so that it compares equal to the stand-in's map[string]any.
	raw, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	var out map[string]any
	Expect(json.Unmarshal(raw, &out)).To(Succeed())
	return out
}
