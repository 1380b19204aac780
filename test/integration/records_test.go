package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// vmipamUser is the username of the chart's ServiceAccount the suite's vmipam runs as.
const vmipamUser = "system:serviceaccount:vmipam-system:vmipam"

// The decision record is the only channel from vmipam to the virtualization controller
// (DESIGN.md §2.2–§2.3): vmipam writes its IPAddresses and its records and nothing the
// virtualization controller owns, nobody else can forge a record, and what the controller
// keeps in a record survives a leader change.
var _ = Describe("The decision record", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.64.0.0/24", "10.64.0.10-10.64.0.40")
	})
	podEntry := func(vm string) func() *sdnv1.NetworksSpecEntry { return onlyPodEntry(ctx, ns, vm, corp) }

	It("is all vmipam writes besides its IPAddresses: no VirtualMachine, no VM status, no pod (the API server's audit log)", func() {
		mark := auditMark()
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.64.0.30"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(naming.AutoIPAddress("v", "ClusterNetwork", corp))))
		By("a live change, a restart, a removal")
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "s" })
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))
		runOperation(ctx, ns, "v", vmv1.OperationRestart)
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(ConsistOf("s"))
		waitApplied(ctx, ns, "v")

		written := map[string]bool{}
		for _, e := range auditEntries(mark) {
			if e.User.Username == vmipamUser && e.ObjectRef.Namespace == ns {
				written[e.ObjectRef.Resource+"/"+e.ObjectRef.Subresource+" "+e.Verb] = true
			}
		}
		Expect(written).To(HaveKey("virtualmachineipams/ create"), "the audit log shows vmipam's writes")
		Expect(written).To(HaveKey("ipaddresses/ delete"))
		for w := range written {
			Expect(w).To(Or(HavePrefix("ipaddresses/ "), HavePrefix("virtualmachineipams/ "), HavePrefix("events/ ")),
				"vmipam wrote something that is not its own")
		}
	})

	It("cannot be forged: a namespace editor may not write it, nobody but vmipam its spec, nobody but the virtualization controller its status", func() {
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "missing-ip")))
		Eventually(func() string { return attachedIn(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, corp) }, timeout, interval).Should(BeEmpty())
		Eventually(func() *v1alpha1.VirtualMachineIPAM { return recordOf(ctx, ns, "v") }, timeout, interval).ShouldNot(BeNil())

		By("a namespace editor (the built-in edit role): RBAC has no verb for records")
		editor := userInNamespace(ctx, ns, "editor", "edit")
		forged := recordOf(ctx, ns, "v")
		attach(forged)
		Expect(apierrors.IsForbidden(editor.Update(ctx, forged))).To(BeTrue(), "an editor updated a record")
		Expect(editor.Get(ctx, client.ObjectKeyFromObject(forged), &v1alpha1.VirtualMachineIPAM{})).To(Succeed(),
			"the editor reads records (aggregated into view)")
		other := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"},
			Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: "x"}}
		Expect(apierrors.IsForbidden(editor.Create(ctx, other))).To(BeTrue(), "an editor created a record")

		By("the cluster admin: the admission policy refuses a spec edit and a status write")
		// The virtualization controller writes the record's status meanwhile: a 409 is retried,
		// so that what is checked is the admission policy's answer.
		var err error
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			forged = recordOf(ctx, ns, "v")
			attach(forged)
			err = k8s.Update(ctx, forged)
			return err
		})
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "the admin edited a record's spec: %v", err)
		Expect(err).To(MatchError(ContainSubstring("only vmipam writes a decision record's spec")))
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			status := recordOf(ctx, ns, "v")
			status.Status.ObservedGeneration = 99
			err = k8s.Status().Update(ctx, status)
			return err
		})
		Expect(err).To(MatchError(ContainSubstring("only the virtualization controller")))
		Expect(k8s.Create(ctx, other)).To(MatchError(ContainSubstring("only vmipam creates decision records")))
		Expect(podEntry("v")()).To(BeNil(), "nothing attached")
	})

	It("is rewritten when someone deletes it or edits it past the admission policy", func() {
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "missing-ip")))
		// The settled decision, not the first record: that may predate the network's Ready
		// (NetworkNotReady) and be re-decided a moment later.
		Eventually(func() string {
			if rec := recordOf(ctx, ns, "v"); rec != nil && len(rec.Spec.Interfaces) == 1 {
				return rec.Spec.Interfaces[0].Reason
			}
			return ""
		}, timeout, interval).Should(Equal(string(evaluator.ReasonIPAddressNotFound)))
		first := recordOf(ctx, ns, "v")

		By("deleted: vmipam writes it again")
		Expect(k8s.Delete(ctx, first)).To(Succeed())
		Eventually(func() types.UID {
			if rec := recordOf(ctx, ns, "v"); rec != nil {
				return rec.UID
			}
			return ""
		}, timeout, interval).ShouldNot(Or(BeEmpty(), Equal(first.UID)))
		Expect(recordOf(ctx, ns, "v").Spec.Interfaces).To(Equal(first.Spec.Interfaces))

		By("its spec edited while the admission policy is not bound: vmipam writes its decision again")
		withoutRecordsPolicy(ctx)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			forged := recordOf(ctx, ns, "v")
			attach(forged)
			return k8s.Update(ctx, forged)
		})).To(Succeed())
		Eventually(func() bool { return recordOf(ctx, ns, "v").Spec.Interfaces[0].Attach }, timeout, interval).Should(BeFalse())
		Expect(recordOf(ctx, ns, "v").Spec.Interfaces).To(Equal(first.Spec.Interfaces))
		// The virtualization controller applies whatever record it reads, so the forged one may
		// have reached the pod before vmipam rewrote it (what the admission policy is for); the
		// rewritten record takes it off again, for good.
		Eventually(podEntry("v"), timeout, interval).Should(BeNil())
		Consistently(podEntry("v"), "1s", interval).Should(BeNil())
	})

	It("keeps a change held until restart held through a live migration: the target carries what the source carries", func() {
		prodNamespace(ctx, ns)
		b := pooledClusterNetworkNamed(ctx, ns+"-b", "10.65.0.0/24")
		autoA := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		stopVMIPAM()
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		startVMIPAM() // the VM starts before any decision: its interface comes as its initial configuration
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(autoA)))
		source := onePod(ctx, ns, "v")

		By("replacing corp by b on the running prod VM: both changes wait for a restart")
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].Name = b })
		Eventually(func() *metav1.Condition { return condition(ctx, ns, "v", consumer.ConditionAwaitingRestart) }, timeout, interval).
			ShouldNot(BeNil())
		waitApplied(ctx, ns, "v")

		By("migrating")
		runOperation(ctx, ns, "v", vmv1.OperationMigrate)
		target := onePod(ctx, ns, "v")
		Expect(target.UID).NotTo(Equal(source.UID))
		Consistently(func() []sdnv1.NetworksSpecEntry { return networksSpec(podOf(ctx, ns, target.Name)) }, "2s", interval).
			Should(ConsistOf(HaveField("IPAddressNames", ConsistOf(autoA))), "the target carries corp, as the source did, and not b")
		Expect(names(ipAddresses(ctx, ns))).To(ContainElement(autoA), "the held removal keeps its address")
		Expect(condition(ctx, ns, "v", consumer.ConditionAwaitingRestart)).NotTo(BeNil(), "still held")

		By("restarting applies both")
		runOperation(ctx, ns, "v", vmv1.OperationRestart)
		Eventually(func() []sdnv1.NetworksSpecEntry { return networksSpec(podOf(ctx, ns, onePod(ctx, ns, "v").Name)) }, timeout, interval).
			Should(ConsistOf(HaveField("Name", b)))
		Eventually(func() *metav1.Condition { return condition(ctx, ns, "v", consumer.ConditionAwaitingRestart) }, timeout, interval).
			Should(BeNil())
	})

	It("keeps a static handoff under way when the leader is killed: the waiter gets the address ReleaseGrace after the release, not sooner", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.64.0.31"))
		create(ctx, build.VM(ns, "holder", build.OnClusterNetwork(corp, "s")))
		Eventually(podEntry("holder"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("s")))
		create(ctx, build.VM(ns, "waiter", build.OnClusterNetwork(corp, "s")))
		Eventually(readyOf(ctx, ns, "waiter"), timeout, interval).Should(ContainSubstring("IPAddressInUse"))

		updateVM(ctx, ns, "holder", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		var since time.Time
		Eventually(func() bool {
			for _, r := range recordOf(ctx, ns, "holder").Spec.Releases {
				if r.Type == v1alpha1.ReleaseStatic && r.IPAddressName == "s" {
					since = r.Since.Time
					return true
				}
			}
			return false
		}, timeout, 10*time.Millisecond).Should(BeTrue(), "the holder's record keeps the handoff")
		By("killing the leader at once and starting a new one")
		stopVMIPAM()
		startVMIPAM()
		Eventually(func() string { return attachedIn(ctx, ns, "waiter", vmv1.NetworkTypeClusterNetwork, corp) }, timeout, 10*time.Millisecond).
			Should(Equal("s"))
		Expect(time.Since(since)).To(BeNumerically(">=", plan.ReleaseGrace), "the new leader handed the address over before ReleaseGrace")
	})

	It("lets the virtualization controller copy a networks-spec annotation of the VM onto its pods, which is why vmipam never writes one", func() {
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(podEntry("v"), timeout, interval).ShouldNot(BeNil())
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) {
			metav1.SetMetaDataAnnotation(&vm.ObjectMeta, sdnv1.AnnotationNetworksSpec, "[]")
		})
		Eventually(func() string { return onePod(ctx, ns, "v").Annotations[sdnv1.AnnotationNetworksSpec] }, timeout, interval).
			Should(Equal("[]"), "VC's metadata propagation overwrites the pod's networks-spec (virtualization-controller facts §3)")
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { delete(vm.Annotations, sdnv1.AnnotationNetworksSpec) })
		Eventually(podEntry("v"), timeout, interval).ShouldNot(BeNil(), "the record applies again once the annotation is gone")
	})
})

// attach makes every interface of rec attached: what a forger wants.
func attach(rec *v1alpha1.VirtualMachineIPAM) {
	for i := range rec.Spec.Interfaces {
		rec.Spec.Interfaces[i].Attach, rec.Spec.Interfaces[i].Reason, rec.Spec.Interfaces[i].Message = true, "", ""
	}
}

// userInNamespace returns a client for user name, bound to the ClusterRole role in ns.
func userInNamespace(ctx context.Context, ns, name, role string) client.Client {
	GinkgoHelper()
	create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}}})
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error { // RBAC's cache
		return c.List(ctx, &v1alpha1.VirtualMachineIPAMList{}, client.InNamespace(ns))
	}, timeout, interval).Should(Succeed())
	return c
}

// withoutRecordsPolicy removes the binding of the chart's records admission policy until the
// spec ends.
func withoutRecordsPolicy(ctx context.Context) {
	GinkgoHelper()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: "vmipam-records"}, binding)).To(Succeed())
	Expect(k8s.Delete(ctx, binding)).To(Succeed())
	DeferCleanup(func() {
		restored := binding.DeepCopy()
		restored.ResourceVersion, restored.UID, restored.CreationTimestamp = "", "", metav1.Time{}
		Expect(k8s.Create(context.Background(), restored)).To(Succeed())
	})
	// the API server's policy cache takes a moment to drop the binding
	Eventually(func() error {
		probe := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vmipam-probe"},
			Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: "probe"}}
		err := k8s.Create(ctx, probe, client.DryRunAll)
		return err
	}, timeout, interval).Should(Succeed())
}

// prodNamespace labels ns env=prod and installs the shipped prod-changes-at-restart sample
// (no live changes in prod) for the spec.
func prodNamespace(ctx context.Context, ns string) {
	GinkgoHelper()
	nsObj := &corev1.Namespace{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
	nsObj.Labels["env"] = "prod"
	Expect(k8s.Update(ctx, nsObj)).To(Succeed())
	policy := prodSample(ns)
	create(ctx, policy)
	DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })
	waitServing(ctx, policy.GetName())
}
