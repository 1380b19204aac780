package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/dryrun/apiserver"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/reads"
	"github.com/vmipam/vmipam/crds/rbac"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	policyv1 "github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/dryrunserver"
)

// The dry-run API, served by the production wiring (controller.Setup and
// controller.SetupDryRun on one manager) in place of the suite's vmipam manager and reached
// only through the kube-apiserver: an APIService, an ExternalName Service for localhost, the
// front proxy's headers. Callers are real: ServiceAccount tokens (TokenRequest), a client
// certificate user, the admin. Every request the manager sends to the API server — the
// controller's and the dry-run server's delegated authentication and authorization —
// passes through drCounter, so "never writes" is measured, not assumed: while the controller
// has nothing to do, dry runs whose answers are full of writes leave the write count and
// every resourceVersion unchanged; the only requests that are not reads are the
// SubjectAccessReviews the server asks for.
var _ = Describe("Dry-run API (aggregated)", Ordered, func() {
	var (
		ctx                         context.Context
		served                      *dryrunserver.Server
		srv                         *apiserver.Server
		port                        int32
		counter                     *drCounter
		ns, other, network          string
		evaluatorSA, policyReviewer client.Client // the shipped roles and get on VMs; policyReviewer has the evaluate verb too
		blind                       client.Client // the evaluator role only: may not get VMs
		stranger                    client.Client // nothing
	)

	BeforeAll(func() {
		ctx = context.Background()
		counter = &drCounter{}
		var err error
		served, err = dryrunserver.New(testEnv)
		Expect(err).NotTo(HaveOccurred())
		stopVMIPAM()
		var stop func()
		srv, port, stop = startDryRunVMIPAM(served, counter, false, 0)
		DeferCleanup(func() {
			stop()
			startVMIPAM()
		})
		Eventually(func() error { return srv.ReadyCheck(nil) }, timeout, interval).Should(Succeed())
		Expect(served.Route(ctx, k8s, port)).To(Succeed())

		drInstallRoles(ctx)
		ns, other = newNamespace(ctx), newNamespace(ctx)
		drReaderRoles(ctx)
		evaluatorSA = drServiceAccount(ctx, ns, "evaluator", append([]string{rbac.ClusterRoleEvaluator}, drReaders...)...)
		policyReviewer = drServiceAccount(ctx, ns, "policy-reviewer", append([]string{rbac.ClusterRoleEvaluator, rbac.ClusterRolePolicyEvaluator}, drReaders...)...)
		blind = drServiceAccount(ctx, ns, "blind", rbac.ClusterRoleEvaluator, "vmipam-test:network-reader", "vmipam-test:ipam-reader", rbac.ClusterRoleRecordViewer)
		stranger = drServiceAccount(ctx, ns, "stranger")

		network = pooledClusterNetwork(ctx, ns, "10.231.0.0/24")
		create(ctx, build.VM(ns, "web", build.OnClusterNetwork(network, "")))
		Eventually(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, network) },
			timeout, interval).ShouldNot(BeEmpty())
	})

	It("answers a ServiceAccount with only the shipped role with 201, as the controller decided, and never writes", func() {
		rvs := drSettled(ctx, counter, ns, network)
		writes, reviews, mark := counter.writesFor(ns), counter.reviews(), auditMark()
		Expect(writes).To(ContainElement(ContainSubstring("/ipaddresses")), "the counter sees the controller's writes")

		By("the live VM: what the controller did, nothing left to do")
		live := getVM(ctx, ns, "web")
		res := drCreate(ctx, evaluatorSA, drEvaluation(ns, live))
		Expect(res.VM).To(Equal(dryrunv1.VMSummary{Namespace: ns, Name: "web", UID: string(live.UID), Exists: true}))
		Expect(res.Interfaces).To(HaveLen(1))
		Expect(res.Interfaces[0]).To(And(HaveField("Attached", true),
			HaveField("Address", statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, network)),
			HaveField("Decision.Allocation", string(evaluator.AllocationAuto)), HaveField("Decision.Policy", "default")))
		Expect(res.Actions.CreateIPAddresses).To(BeEmpty())
		Expect(res.Actions.DeleteIPAddresses).To(BeEmpty())
		Expect(res.Actions.RecordChanged).To(BeFalse())
		Expect(res.Applied.Conditions[0].Message).To(Equal(networkReady(ctx, ns, "web").Message))

		By("a second interface on a Network that exists only in the request")
		changed := live.DeepCopy()
		changed.Spec.Networks = append(changed.Spec.Networks, vmv1.NetworksSpec{Type: vmv1.NetworkTypeNetwork, Name: "lan"})
		lan := build.Network("", "lan", "lan-pool")
		lan.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
			LastTransitionTime: metav1.Now()}}
		res = drCreate(ctx, evaluatorSA, drEvaluation(ns, changed, drTyped(lan, "Network"), drTyped(build.Pool("", "lan-pool", "10.232.0.0/24"), "IPAddressPool")))
		Expect(res.Interfaces[1]).To(And(HaveField("Decision.Allocation", string(evaluator.AllocationAuto)),
			HaveField("Reason", string(evaluator.ReasonIPAddressPending))))
		Expect(res.Actions.CreateIPAddresses).To(ConsistOf(HaveField("Spec.NetworkRef.Name", "lan")))

		By("the objects lived for that request only")
		res = drCreate(ctx, evaluatorSA, drEvaluation(ns, changed))
		Expect(res.Interfaces[1].Reason).To(Equal(string(evaluator.ReasonNetworkNotFound)))

		By("a VM that does not exist")
		res = drCreate(ctx, evaluatorSA, drEvaluation(ns, build.VM(ns, "fresh", build.OnClusterNetwork(network, "fresh-ip"))))
		Expect(res.VM.Exists).To(BeFalse())
		Expect(res.Interfaces[0].Reason).To(Equal(string(evaluator.ReasonIPAddressNotFound)))

		By("nothing was written")
		Consistently(func() []string { return counter.writesFor(ns) }, 2*time.Second, interval).Should(Equal(writes),
			"requests other than reads and reviews")
		Expect(counter.reviews()).To(BeNumerically(">", reviews), "callers were authorized by the API server")
		Expect(drResourceVersions(ctx, ns, network)).To(Equal(rvs))
		Expect(auditedWrites(mark, ns, network)).To(BeEmpty(), "the API server's audit log has no write but the Evaluations")
		Expect(auditedEvaluations(mark, ns)).To(BeNumerically(">=", 4), "the audit log saw the Evaluations")
	})

	It("refuses the same ServiceAccount in another namespace, and candidate policies without the evaluate verb, with 403", func() {
		vm := getVM(ctx, ns, "web")
		err := drCreateErr(ctx, evaluatorSA, drEvaluation(other, build.VM(other, "web", build.OnClusterNetwork(network, ""))))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`cannot create resource "evaluations" in API group "dryrun.ipam.virtualization.deckhouse.io" in the namespace %q`, other))

		Expect(apierrors.IsForbidden(drCreateErr(ctx, stranger, drEvaluation(ns, vm)))).To(BeTrue())

		withPolicies := drEvaluation(ns, vm)
		withPolicies.Spec.Policies = []runtime.RawExtension{{Raw: []byte(drHoldPolicy)}}
		err = drCreateErr(ctx, evaluatorSA, withPolicies.DeepCopy())
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`cannot evaluate resource "clusteripampolicies" in API group "ipam.virtualization.deckhouse.io" at the cluster scope`))

		By("with the evaluate verb (and no power to create policies): 201, the candidate decides")
		res := drCreate(ctx, policyReviewer, withPolicies.DeepCopy())
		Expect(res.Policies.Source).To(Equal(dryrunv1.PoliciesRequest))
		Expect(res.Interfaces[0].Decision).To(And(HaveField("Policy", "hold-all"), HaveField("Reason", "HeldByCandidate")))
		Expect(apierrors.IsForbidden(policyReviewer.Create(ctx, &unstructured.Unstructured{Object: drPolicyObject()}))).To(BeTrue(),
			"evaluate grants no create")
	})

	It("needs get on an existing VM to evaluate it, by name or by manifest: a caller never learns more than they could read", func() {
		live := getVM(ctx, ns, "web")
		byName := &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "web"}}
		for _, tc := range []struct {
			what string
			ev   *dryrunv1.Evaluation
		}{{"spec.vm", drEvaluation(ns, live)}, {"spec.virtualMachineName", byName}} {
			what, ev := tc.what, tc.ev
			err := drCreateErr(ctx, blind, ev.DeepCopy())
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s: %v", what, err)
			Expect(err.Error()).To(And(ContainSubstring(`cannot get resource "virtualmachines" in API group %q in the namespace %q`, vmv1.GroupVersion.Group, ns),
				ContainSubstring(what), ContainSubstring("requires it"), Not(ContainSubstring(string(live.UID)))), what)
		}

		By("a VM that does not exist needs no get")
		res := drCreate(ctx, blind, drEvaluation(ns, build.VM(ns, "fresh", build.OnClusterNetwork(network, "fresh-ip"))))
		Expect(res.VM.Exists).To(BeFalse())

		By("with get on the VM, both forms answer, with the live copy")
		create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blind-vm-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vmipam-test:vm-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "blind"}}})
		for _, ev := range []*dryrunv1.Evaluation{byName, drEvaluation(ns, live)} {
			Eventually(func() error {
				c := ev.DeepCopy()
				err := blind.Create(ctx, c)
				res = &c.Status
				return err
			}, timeout, interval).Should(Succeed())
			Expect(res.VM).To(And(HaveField("Exists", true), HaveField("UID", string(live.UID))))
			Expect(res.Actions.RecordChanged).To(BeFalse())
		}
	})

	It("authorizes a user who authenticated with a client certificate: the API server authenticates, not vmipam", func() {
		user, err := testEnv.Env.AddUser(envtest.User{Name: "alice"}, nil)
		Expect(err).NotTo(HaveOccurred())
		create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.ClusterRoleEvaluator},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}})
		drBind(ctx, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}, drReaders...)
		Expect(user.Config().CertData).NotTo(BeEmpty())
		Expect(user.Config().BearerToken).To(BeEmpty())
		alice := drClient(user.Config())
		var res *dryrunv1.EvaluationStatus
		Eventually(func() error {
			ev := drEvaluation(ns, build.VM(ns, "fresh", build.OnClusterNetwork(network, "")))
			err := alice.Create(ctx, ev)
			res = &ev.Status
			return err
		}, timeout, interval).Should(Succeed())
		Expect(res.VM).To(HaveField("Name", "fresh"))
		Expect(apierrors.IsForbidden(drCreateErr(ctx, alice, drEvaluation(other, build.VM(other, "web", build.OnClusterNetwork(network, "")))))).To(BeTrue())
	})

	// One VM's IPAddresses and launcher pods are looked up in index buckets that span
	// namespaces (controller/index/bucket.go); the read guard must ask list in the VM's
	// namespace only, and hand out nothing of the others.
	It("answers a caller whose reads are namespace RoleBindings when the VM's buckets hold another namespace's objects, and leaks none of them", func() {
		live := getVM(ctx, ns, "web")
		Eventually(func() []corev1.Pod { return launcherPods(ctx, ns, "web") }, timeout, interval).ShouldNot(BeEmpty())

		By("a running VM of the same name in the other namespace")
		create(ctx, build.VM(other, "web", build.OnClusterNetwork(network, "")))
		Eventually(func() []corev1.Pod { return launcherPods(ctx, other, "web") }, timeout, interval).ShouldNot(BeEmpty())
		otherPod := launcherPods(ctx, other, "web")[0].Name
		otherVM := getVM(ctx, other, "web")
		By("an IPAddress in the other namespace whose controlling owner UID is ns/web's: in ns/web's IPAddress bucket")
		forged := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "forged-owned-by-web",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine", Name: "web",
				UID: live.UID, Controller: ptr.To(true)}}},
			Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto,
				NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: network}}}
		forged.Finalizers = []string{"vmipam.test/keep"} // garbage collection may mark it (its owner is not in its namespace); the cache keeps it
		create(ctx, forged)
		DeferCleanup(func(ctx context.Context) {
			Expect(client.IgnoreNotFound(k8s.Patch(ctx, forged.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))).To(Succeed())
		})

		By("a caller whose reads are all RoleBindings in ns (the cluster-scoped networks and pools cluster-wide)")
		if err := k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "vmipam-test:cluster-network-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{sdnv1.GroupVersion.Group}, Resources: []string{"clusternetworks", "clusteripaddresspools"},
				Verbs: []string{"get", "list"}}}}); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ns-only"}})
		subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "ns-only"}}
		for _, role := range append([]string{rbac.ClusterRoleEvaluator}, drReaders...) {
			create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "ns-only-"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: subject})
		}
		drBind(ctx, subject[0], "vmipam-test:cluster-network-reader")
		nsOnly := drClient(drConfigOf(ctx, ns, "ns-only"))

		var res *dryrunv1.EvaluationStatus
		Eventually(func() error {
			ev := drEvaluation(ns, live)
			err := nsOnly.Create(ctx, ev)
			res = &ev.Status
			return err
		}, timeout, interval).Should(Succeed(), "a namespace user must get an answer, not a 403")
		Expect(res.VM).To(And(HaveField("Exists", true), HaveField("UID", string(live.UID))))
		Expect(res.Actions.DeleteIPAddresses).To(BeEmpty())
		Expect(res.Actions.CreateIPAddresses).To(BeEmpty())
		Expect(res.Interfaces).To(HaveLen(1))
		Expect(res.Interfaces[0]).To(HaveField("Attached", true))
		answer, err := json.Marshal(res)
		Expect(err).NotTo(HaveOccurred())
		for _, secret := range []string{other, otherPod, string(otherVM.UID), forged.Name,
			statusAddress(ctx, other, "web", vmv1.NetworkTypeClusterNetwork, network)} {
			if secret != "" {
				Expect(string(answer)).NotTo(ContainSubstring(secret), "the answer leaks %q of namespace %s", secret, other)
			}
		}

		By("the same by spec.virtualMachineName")
		byName := &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "web"}}
		Expect(nsOnly.Create(ctx, byName)).To(Succeed())
		Expect(byName.Status.VM.UID).To(Equal(string(live.UID)))
	})

	It("gives namespace admins the role by default (aggregated into admin)", func() {
		create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "stranger"}}})
		drBind(ctx, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "stranger"}, drReaders...)
		Eventually(func() error {
			return stranger.Create(ctx, drEvaluation(ns, build.VM(ns, "fresh", build.OnClusterNetwork(network, ""))))
		}, timeout, interval).Should(Succeed())
	})

	It("answers malformed input with 422 naming the place", func() {
		compileErrors := drMetric("vmipam_policy_compile_errors_total", "source", "dryrun")
		vm := getVM(ctx, ns, "web")
		bogus := drManifest(vm)
		bogus.Spec.Networks[1].Type = "Bogus"
		broken := drEvaluation(ns, vm)
		broken.Spec.Policies = []runtime.RawExtension{{Raw: []byte(strings.Replace(drHoldPolicy, `"true"`, `"ipAdress.exists"`, 1))}}
		tooMany := drEvaluation(ns, vm) // each would be compiled for the request alone
		for i := range dryrun.MaxPolicies + 1 {
			tooMany.Spec.Policies = append(tooMany.Spec.Policies, runtime.RawExtension{Raw: []byte(
				strings.Replace(drHoldPolicy, `"hold-all"`, fmt.Sprintf(`"hold-%d"`, i), 1))})
		}
		for _, tc := range []struct {
			ev             *dryrunv1.Evaluation
			field, message string
		}{
			{drEvaluation(ns, bogus), "spec.vm.spec.networks[1].type", `Unsupported value: "Bogus"`},
			{broken, "spec.policies[0].spec.skipRules[0].expression", "undeclared reference to 'ipAdress'"},
			{tooMany, "spec.policies", fmt.Sprintf("must have at most %d items", dryrun.MaxPolicies)},
			{&dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}, "spec.vm", "Required value"},
			{drEvaluation(ns, build.VM(other, "web", build.OnClusterNetwork(network, ""))), "spec.vm.metadata.namespace", "must be the Evaluation's namespace"},
		} {
			err := drCreateErr(ctx, policyReviewer, tc.ev)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			st := err.(apierrors.APIStatus).Status()
			Expect(st.Code).To(BeEquivalentTo(http.StatusUnprocessableEntity))
			Expect(st.Details.Causes).To(ContainElement(And(HaveField("Field", tc.field), HaveField("Message", ContainSubstring(tc.message)))))
		}
		Expect(drMetric("vmipam_policy_compile_errors_total", "source", "dryrun")-compileErrors).To(Equal(1.0),
			"the candidate policy that did not compile is counted")
	})

	It("refuses a 10 MiB body", func() {
		big := drManifest(getVM(ctx, ns, "web"))
		big.Annotations = map[string]string{"padding": strings.Repeat("x", 10<<20)}
		err := drCreateErr(ctx, evaluatorSA, drEvaluation(ns, big))
		Expect(apierrors.IsRequestEntityTooLargeError(err)).To(BeTrue(), "%v", err)
	})

	It("answers an evaluation past its deadline with 504, from a standby replica with a 1ns --dry-run-timeout", func() {
		slow, slowPort, stop := startDryRunVMIPAM(served, &drCounter{}, true, time.Nanosecond)
		defer stop()
		defer func() { Expect(served.Route(ctx, k8s, port)).To(Succeed()) }()
		Eventually(func() error { return slow.ReadyCheck(nil) }, timeout, interval).Should(Succeed())
		Expect(served.Route(ctx, k8s, slowPort)).To(Succeed())
		var err error
		Eventually(func() bool {
			err = drCreateErr(ctx, evaluatorSA, drEvaluation(ns, getVM(ctx, ns, "web")))
			return apierrors.IsTimeout(err)
		}, timeout, interval).Should(BeTrue(), "last: %v", err)
		Expect(err.(apierrors.APIStatus).Status().Code).To(BeEquivalentTo(http.StatusGatewayTimeout))
		Expect(err.Error()).To(ContainSubstring("the evaluation did not finish within 1ns"))
	})

	It("is answered by a standby replica too, with the installed policies, and the standby is Ready", func() {
		installed := drPolicyObject()
		installed["metadata"] = map[string]any{"name": "dryrun-standby-hold"}
		spec := installed["spec"].(map[string]any)
		spec["match"] = map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "no-such-namespace"}}}
		policy := &unstructured.Unstructured{Object: installed}
		Expect(k8s.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, policy))).To(Succeed()) })

		standby, standbyPort, stop := startDryRunVMIPAM(served, &drCounter{}, true, 0)
		defer stop()
		defer func() { Expect(served.Route(ctx, k8s, port)).To(Succeed()) }()
		Eventually(func() error { return standby.ReadyCheck(nil) }, timeout, interval).Should(Succeed(), "a standby turns Ready")
		Expect(served.Route(ctx, k8s, standbyPort)).To(Succeed())
		live := getVM(ctx, ns, "web")
		var res *dryrunv1.EvaluationStatus
		policyReader := drServiceAccount(ctx, ns, "standby-reader", append([]string{rbac.ClusterRoleEvaluator, "vmipam-test:policy-reader"}, drReaders...)...)
		Eventually(func() []string {
			ev := drEvaluation(ns, live)
			if err := policyReader.Create(ctx, ev); err != nil {
				return []string{err.Error()}
			}
			res = &ev.Status
			return res.Policies.Order
		}, timeout, interval).Should(ContainElement("dryrun-standby-hold"), "the standby's registry follows the installed policies")
		Expect(res.Interfaces[0]).To(And(HaveField("Decision.Policy", "default"), HaveField("Attached", true)))
		Expect(res.Actions.RecordChanged).To(BeFalse())
	})

	It("serves discovery and OpenAPI: kubectl create -f an Evaluation prints its status, kubectl explain describes it", func() {
		dir := GinkgoT().TempDir()
		evFile := filepath.Join(dir, "evaluation.yaml")
		ev := drEvaluation(ns, getVM(ctx, ns, "web"))
		ev.APIVersion, ev.Kind = dryrunv1.SchemeGroupVersion.String(), dryrunv1.Kind
		data, err := yaml.Marshal(ev)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(evFile, data, 0o600)).To(Succeed())

		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			By("no kubectl here: the dynamic client creates the Evaluation from the YAML")
			obj := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed())
			dyn, err := dynamic.NewForConfig(testEnv.Config)
			Expect(err).NotTo(HaveOccurred())
			out, err := dyn.Resource(dryrunv1.SchemeGroupVersion.WithResource(dryrunv1.Resource)).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(out.Object).To(HaveKeyWithValue("status", HaveKeyWithValue("vm", HaveKeyWithValue("exists", true))))
			return
		}
		run := func(args ...string) string {
			cmd := exec.Command(kubectl, append([]string{"--kubeconfig", testEnv.Kubeconfig}, args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), stderr.String())
			return string(out)
		}
		out := run("create", "-f", evFile, "-o", "yaml")
		answer := &dryrunv1.Evaluation{}
		Expect(yaml.Unmarshal([]byte(out), answer)).To(Succeed())
		Expect(answer.Status.VM).To(And(HaveField("Name", "web"), HaveField("Exists", true)))
		Expect(answer.Status.Interfaces).To(ConsistOf(HaveField("Decision.Allocation", string(evaluator.AllocationAuto))))
		Expect(run("explain", "evaluations.spec")).To(And(ContainSubstring("virtualMachineName"), ContainSubstring("policies")))
		Expect(run("explain", "evaluations.status.interfaces.decision")).To(ContainSubstring("allocation"))
	})

	It("serves `kubectl ipam dry-run` with a kubeconfig alone", func() {
		dir := GinkgoT().TempDir()
		vmFile := filepath.Join(dir, "vm.yaml")
		vm := build.VM("", "web", build.OnClusterNetwork(network, ""))
		vm.APIVersion, vm.Kind = vmv1.GroupVersion.String(), "VirtualMachine"
		data, err := yaml.Marshal(vm)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(vmFile, data, 0o600)).To(Succeed())
		var out, errOut bytes.Buffer
		code := cli.Main(ctx, "kubectl-ipam", []string{"dry-run", "-f", vmFile, "--kubeconfig", testEnv.Kubeconfig, "-n", ns},
			cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		Expect(code).To(Equal(0), errOut.String())
		Expect(out.String()).To(And(ContainSubstring("VirtualMachine %s/web (exists)", ns),
			MatchRegexp(`ClusterNetwork/%s\s+Auto\s+yes`, network)))

		By("ipamctl version shows the controller's version too, read through the API server")
		out.Reset()
		code = cli.Main(ctx, "ipamctl", []string{"version", "--kubeconfig", testEnv.Kubeconfig},
			cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		Expect(code).To(Equal(0), errOut.String())
		Expect(out.String()).To(And(HavePrefix("ipamctl "), ContainSubstring("\nServer: vmipam %s\n", drVersion)))
	})

	It("answers kubectl create -f for a user who has only the edit role: kubectl leaves field validation to the server", func() {
		kubectl, err := exec.LookPath("kubectl")
		if err != nil {
			Skip("kubectl is not on PATH: the plain `kubectl create -f` of an edit user cannot be checked here")
		}
		create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"}})
		create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "editor"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "editor"}}})
		drBind(ctx, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "editor"}, drReaders...)
		dir := GinkgoT().TempDir()
		ev := drEvaluation(ns, build.VM(ns, "fresh", build.OnClusterNetwork(network, "")))
		ev.APIVersion, ev.Kind = dryrunv1.SchemeGroupVersion.String(), dryrunv1.Kind
		evFile := filepath.Join(dir, "evaluation.yaml")
		data, err := yaml.Marshal(ev)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(evFile, data, 0o600)).To(Succeed())
		kc := func(args ...string) (string, string, error) {
			cmd := exec.Command(kubectl, append([]string{"--kubeconfig", testEnv.Kubeconfig, "--cache-dir", filepath.Join(dir, "cache"),
				"--as", "system:serviceaccount:" + ns + ":editor"}, args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			return stdout.String(), stderr.String(), err
		}
		_, stderr, err := kc("get", "customresourcedefinitions")
		Expect(err).To(HaveOccurred(), "the editor cannot list CRDs (what client-side validation needs)")
		Expect(stderr).To(ContainSubstring("forbidden"))
		var out string
		Eventually(func() error {
			var err error
			out, stderr, err = kc("create", "-f", evFile, "-o", "yaml")
			if err != nil {
				return fmt.Errorf("%w: %s", err, stderr)
			}
			return nil
		}, timeout, interval).Should(Succeed())
		answer := &dryrunv1.Evaluation{}
		Expect(yaml.Unmarshal([]byte(out), answer)).To(Succeed())
		Expect(answer.Status.VM).To(And(HaveField("Name", "fresh"), HaveField("Exists", false)))

		By("kubectl sent fieldValidation=Strict: an unknown field inside spec.vm is the server's 422")
		raw := map[string]any{}
		Expect(yaml.Unmarshal(data, &raw)).To(Succeed())
		vm := raw["spec"].(map[string]any)["vm"].(map[string]any)
		vm["spec"].(map[string]any)["networks"].([]any)[0].(map[string]any)["bogus"] = "x"
		data, err = yaml.Marshal(raw)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(evFile, data, 0o600)).To(Succeed())
		_, stderr, err = kc("create", "-f", evFile, "-o", "yaml")
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(And(ContainSubstring("spec.vm.spec.networks[0].bogus"), ContainSubstring("Invalid")), stderr)
	})

	It("treats unknown fields inside spec.vm, spec.policies and spec.objects by fieldValidation: Strict 422, Warn a warning, Ignore dropped", func() {
		vm := drManifest(getVM(ctx, ns, "web"))
		raw := map[string]any{}
		Expect(json.Unmarshal([]byte(drJSON(vm)), &raw)).To(Succeed())
		raw["spec"].(map[string]any)["networks"].([]any)[0].(map[string]any)["bogus"] = "x"
		// metadata too, as ObjectMeta's own decoding finds them (the CRD schemas leave
		// metadata open): they were accepted silently under Strict.
		raw["metadata"].(map[string]any)["bogusMeta"] = "x"
		policy := drPolicyObject()
		policy["spec"].(map[string]any)["allocation"].(map[string]any)["bogus"] = true
		pool := drTyped(build.Pool("", "lan-pool", "10.232.0.0/24"), "IPAddressPool")
		pool["spec"].(map[string]any)["bogus"] = int64(1)
		pool["metadata"].(map[string]any)["bogusMeta"] = map[string]any{"x": int64(1)}
		ev := &unstructured.Unstructured{Object: map[string]any{"apiVersion": dryrunv1.SchemeGroupVersion.String(), "kind": dryrunv1.Kind,
			"metadata": map[string]any{"namespace": ns}, "spec": map[string]any{"vm": raw, "policies": []any{policy}, "objects": []any{pool}}}}
		paths := []string{"spec.vm.spec.networks[0].bogus", "spec.policies[0].spec.allocation.bogus", "spec.objects[0].spec.bogus",
			"spec.vm.metadata.bogusMeta", "spec.objects[0].metadata.bogusMeta"}
		warnings := &drWarnings{}
		cfg := rest.CopyConfig(testEnv.Config)
		cfg.WarningHandler = warnings
		dyn, err := dynamic.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		evaluations := dyn.Resource(dryrunv1.SchemeGroupVersion.WithResource(dryrunv1.Resource)).Namespace(ns)

		_, err = evaluations.Create(ctx, ev.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "Strict: %v", err)
		causes := err.(apierrors.APIStatus).Status().Details.Causes
		for _, p := range paths {
			Expect(causes).To(ContainElement(And(HaveField("Field", p), HaveField("Message", ContainSubstring("unknown field")))), p)
		}

		out, err := evaluations.Create(ctx, ev.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationWarn})
		Expect(err).NotTo(HaveOccurred(), "Warn")
		Expect(out.Object).To(HaveKey("status"))
		for _, p := range paths {
			Expect(warnings.all()).To(ContainElement(ContainSubstring(`unknown field "%s"`, p)), "Warn")
		}

		warnings.reset()
		_, err = evaluations.Create(ctx, ev.DeepCopy(), metav1.CreateOptions{FieldValidation: metav1.FieldValidationIgnore})
		Expect(err).NotTo(HaveOccurred(), "Ignore")
		Expect(warnings.all()).To(BeEmpty(), "Ignore")
	})

	It("checks the Evaluation's own metadata as the API server checks a create: syntax 422 at its path, unknown fields by fieldValidation", func() {
		warnings := &drWarnings{}
		cfg := rest.CopyConfig(testEnv.Config)
		cfg.WarningHandler = warnings
		dyn, err := dynamic.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		evaluations := dyn.Resource(dryrunv1.SchemeGroupVersion.WithResource(dryrunv1.Resource)).Namespace(ns)
		evaluation := func(meta map[string]any) *unstructured.Unstructured {
			meta["namespace"] = ns
			return &unstructured.Unstructured{Object: map[string]any{"apiVersion": dryrunv1.SchemeGroupVersion.String(), "kind": dryrunv1.Kind,
				"metadata": meta, "spec": map[string]any{"virtualMachineName": "web"}}}
		}
		for field, meta := range map[string]map[string]any{
			"metadata.name":         {"name": "Bad_Name"},
			"metadata.generateName": {"generateName": "Bad_"},
			"metadata.labels":       {"labels": map[string]any{"bad key!": "v"}},
			"metadata.annotations":  {"annotations": map[string]any{"bad key!": "v"}},
		} {
			_, err := evaluations.Create(ctx, evaluation(meta), metav1.CreateOptions{})
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", field, err)
			Expect(err.(apierrors.APIStatus).Status().Details.Causes).To(ContainElement(HaveField("Field", HavePrefix(field))), field)
		}
		_, err = evaluations.Create(ctx, evaluation(map[string]any{"name": "ok", "bogus": "x"}), metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
		Expect(err).To(HaveOccurred(), "Strict")
		Expect(err.Error()).To(ContainSubstring(`unknown field "metadata.bogus"`))
		out, err := evaluations.Create(ctx, evaluation(map[string]any{"name": "ok", "labels": map[string]any{"a": "b"}, "bogus": "x"}),
			metav1.CreateOptions{FieldValidation: metav1.FieldValidationWarn})
		Expect(err).NotTo(HaveOccurred(), "Warn")
		Expect(warnings.all()).To(ContainElement(ContainSubstring(`unknown field "metadata.bogus"`)))
		Expect(out.GetName()).To(Equal("ok"))
		Expect(out.GetLabels()).To(Equal(map[string]string{"a": "b"}))
		Expect(out.Object["metadata"]).NotTo(HaveKey("bogus"))
	})

	It("answers a key repeated inside spec by fieldValidation: Strict 422 naming it, Warn a warning", func() {
		cs, err := kubernetes.NewForConfig(testEnv.Config)
		Expect(err).NotTo(HaveOccurred())
		body := []byte(`{"apiVersion": "` + dryrunv1.SchemeGroupVersion.String() + `", "kind": "Evaluation", "metadata": {"namespace": "` + ns + `"},
		  "spec": {"virtualMachineName": "nope", "virtualMachineName": "web"}}`)
		path := "/apis/" + dryrunv1.SchemeGroupVersion.String() + "/namespaces/" + ns + "/evaluations"
		err = cs.Discovery().RESTClient().Post().AbsPath(path).Param("fieldValidation", "Strict").Body(body).Do(ctx).Error()
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`duplicate field "spec.virtualMachineName"`))

		warnings := &drWarnings{}
		cfg := rest.CopyConfig(testEnv.Config)
		cfg.WarningHandler = warnings
		cs, err = kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(cs.Discovery().RESTClient().Post().AbsPath(path).Param("fieldValidation", "Warn").Body(body).Do(ctx).Error()).To(Succeed())
		Expect(warnings.all()).To(ContainElement(`duplicate field "spec.virtualMachineName"`))
	})

	It("answers a wrong JSON type with 422 at its path, and an Evaluation in a namespace that does not exist with 404", func() {
		dyn, err := dynamic.NewForConfig(testEnv.Config)
		Expect(err).NotTo(HaveOccurred())
		evaluations := dyn.Resource(dryrunv1.SchemeGroupVersion.WithResource(dryrunv1.Resource))
		for _, tc := range []struct {
			spec  map[string]any
			field string
		}{
			{map[string]any{"virtualMachineName": 5}, "spec.virtualMachineName"},
			{map[string]any{"vm": "web"}, "spec.vm"},
			{map[string]any{"virtualMachineName": "web", "policies": map[string]any{}}, "spec.policies"},
		} {
			ev := &unstructured.Unstructured{Object: map[string]any{"apiVersion": dryrunv1.SchemeGroupVersion.String(), "kind": dryrunv1.Kind,
				"metadata": map[string]any{"namespace": ns}, "spec": tc.spec}}
			_, err := evaluations.Namespace(ns).Create(ctx, ev, metav1.CreateOptions{})
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", tc.field, err)
			Expect(err.(apierrors.APIStatus).Status().Details.Causes).To(ContainElement(HaveField("Field", tc.field)), tc.field)
		}

		missing := "no-such-namespace-" + ns
		err = drCreateErr(ctx, evaluatorSA, drEvaluation(missing, build.VM(missing, "fresh", build.OnClusterNetwork(network, ""))))
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a caller without create there learns nothing: %v", err)
		err = drClient(testEnv.Config).Create(ctx, drEvaluation(missing, build.VM(missing, "fresh", build.OnClusterNetwork(network, ""))))
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`namespaces "%s" not found`, missing))
	})

	It("negotiates JSON and YAML only: a client preferring protobuf gets JSON, and OpenAPI offers no protobuf", func() {
		cfg := rest.CopyConfig(testEnv.Config)
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf, application/json"
		cfg.ContentType = "application/json"
		cfg.GroupVersion = &dryrunv1.SchemeGroupVersion
		cfg.APIPath = "/apis"
		cfg.NegotiatedSerializer = apiserver.Codecs.WithoutConversion()
		rc, err := rest.RESTClientFor(cfg)
		Expect(err).NotTo(HaveOccurred())
		ev := drEvaluation(ns, getVM(ctx, ns, "web"))
		var status int
		res := rc.Post().Namespace(ns).Resource(dryrunv1.Resource).Body([]byte(drJSON(ev))).Do(ctx).StatusCode(&status)
		Expect(res.Error()).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusCreated))
		raw, err := res.Raw()
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Valid(raw)).To(BeTrue(), "a JSON answer: %q", raw)
		Expect(string(raw)).NotTo(ContainSubstring("managedFields"), "an Evaluation is never stored")

		doc, err := rc.Get().AbsPath("/openapi/v3/apis/" + dryrunv1.SchemeGroupVersion.String()).DoRaw(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(doc)).To(And(ContainSubstring("application/json"), Not(ContainSubstring("protobuf"))))
	})

	It("answers every verb but create with 405, as the API server does for its own review resources, and lists only create", func() {
		cs, err := kubernetes.NewForConfig(testEnv.Config)
		Expect(err).NotTo(HaveOccurred())
		resources, err := cs.Discovery().ServerResourcesForGroupVersion(dryrunv1.SchemeGroupVersion.String())
		Expect(err).NotTo(HaveOccurred())
		Expect(resources.APIResources).To(ConsistOf(And(HaveField("Name", dryrunv1.Resource), HaveField("Verbs", ConsistOf("create")))))
		rc := cs.Discovery().RESTClient()
		code := func(verb, path string) int {
			var status int
			body := []byte("{}")
			if verb == http.MethodPatch {
				rc.Patch("application/merge-patch+json").AbsPath(path).Body(body).Do(ctx).StatusCode(&status)
			} else {
				rc.Verb(verb).AbsPath(path).Body(body).Do(ctx).StatusCode(&status)
			}
			return status
		}
		evaluations := "/apis/" + dryrunv1.SchemeGroupVersion.String() + "/namespaces/" + ns + "/evaluations"
		reviews := "/apis/authorization.k8s.io/v1/namespaces/" + ns + "/localsubjectaccessreviews"
		for _, tc := range []struct{ verb, suffix string }{
			{http.MethodGet, ""}, {http.MethodDelete, ""}, {http.MethodGet, "/x"}, {http.MethodDelete, "/x"}, {http.MethodPut, "/x"}, {http.MethodPatch, "/x"},
		} {
			By(fmt.Sprintf("%s %s: the API server answers %d for localsubjectaccessreviews", tc.verb, tc.suffix, code(tc.verb, reviews+tc.suffix)))
			Expect(code(tc.verb, evaluations+tc.suffix)).To(Equal(http.StatusMethodNotAllowed), "%s evaluations%s", tc.verb, tc.suffix)
		}
	})

	It("never shows a caller what it could not read: other objects the evaluation reads need get or list too", func() {
		nosy := drServiceAccount(ctx, ns, "nosy", rbac.ClusterRoleEvaluator, "vmipam-test:vm-reader", "vmipam-test:network-reader", rbac.ClusterRoleRecordViewer)
		live := getVM(ctx, ns, "web")
		address := statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, network)
		err := drCreateErr(ctx, nosy, drEvaluation(ns, live))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(And(MatchRegexp(`cannot (get|list) resource "ipaddresses" in API group %q in the namespace %q`, sdnv1.GroupVersion.Group, ns),
			Not(ContainSubstring(address))))

		By("a fresh VM wanting a static IPAddress another VM holds: the holder's name needs list on virtualmachines")
		holdsStatic := build.VM(ns, "holder", build.OnClusterNetwork(network, "shared-ip"))
		create(ctx, holdsStatic)
		reader := drServiceAccount(ctx, ns, "no-vms", rbac.ClusterRoleEvaluator, "vmipam-test:ipam-reader", "vmipam-test:network-reader")
		Eventually(func() error {
			return drCreateErr(ctx, reader, drEvaluation(ns, build.VM(ns, "fresh", build.OnClusterNetwork(network, "shared-ip"))))
		}, timeout, interval).Should(MatchError(ContainSubstring(`cannot list resource "virtualmachines"`)))
	})

	It("shows the installed policies' order and traces only to a caller who may list them", func() {
		secret := map[string]any{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
			"metadata": map[string]any{"name": "dryrun-admin-only"},
			"spec": map[string]any{"priority": 5, "mode": "Audit",
				"match":     map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}},
				"variables": []any{map[string]any{"name": "token", "expression": "'s3cr3t-t0ken'"}},
				"skipRules": []any{map[string]any{"name": "audit-secret-rule", "expression": "variables.token != ''",
					"reason": "AuditedSecret", "message": "audit-secret-message"}}}}
		policy := &unstructured.Unstructured{Object: secret}
		Expect(k8s.Create(ctx, policy)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, policy))).To(Succeed()) })
		reader := drServiceAccount(ctx, ns, "policy-reader", append([]string{rbac.ClusterRoleEvaluator, "vmipam-test:policy-reader"}, drReaders...)...)
		live := getVM(ctx, ns, "web")

		By("a reader of the policies sees the order, the variables and the Audit record")
		Eventually(func() string {
			ev := drEvaluation(ns, live)
			if err := reader.Create(ctx, ev); err != nil {
				return err.Error()
			}
			return drJSON(ev.Status)
		}, timeout, interval).Should(And(ContainSubstring("s3cr3t-t0ken"), ContainSubstring("audit-secret-rule"), ContainSubstring("dryrun-admin-only")))

		By("a caller who may not list them: the decision, not the details, and it is told so")
		warnings := &drWarnings{}
		cfg := rest.CopyConfig(drConfigOf(ctx, ns, "evaluator"))
		cfg.WarningHandler = warnings
		ev := drEvaluation(ns, live)
		Expect(drClient(cfg).Create(ctx, ev)).To(Succeed())
		answer := drJSON(ev.Status)
		Expect(answer).NotTo(Or(ContainSubstring("s3cr3t-t0ken"), ContainSubstring("audit-secret"), ContainSubstring("dryrun-admin-only")))
		Expect(ev.Status.Policies.Order).To(BeEmpty())
		Expect(ev.Status.Omitted).To(Equal([]string{dryrunv1.OmittedPolicyDetails}))
		Expect(ev.Status.Interfaces[0]).To(And(HaveField("Attached", true), HaveField("Decision.Policy", "default")))
		Expect(warnings.all()).To(ContainElement(dryrunv1.OmittedPolicyDetails))
	})

	It("is ready and counts its answers", func() {
		Expect(srv.ReadyCheck(nil)).To(Succeed())
		Expect(drMetric("vmipam_dryrun_requests_total", "code", "201")).To(BeNumerically(">", 0))
		Expect(drMetric("vmipam_dryrun_requests_total", "code", "403")).To(BeNumerically(">", 0))
		Expect(drMetric("vmipam_dryrun_requests_total", "code", "422")).To(BeNumerically(">", 0))
		Expect(drMetric("vmipam_decisions_total", "source", "dryrun")).To(BeNumerically(">", 0))
	})
})

// auditEntry is the part of an audit event the specs read.
type auditEntry struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name string
	} `json:"objectRef"`
}

// auditMark is the current end of the audit log.
func auditMark() int64 {
	GinkgoHelper()
	fi, err := os.Stat(auditLog)
	Expect(err).NotTo(HaveOccurred())
	return fi.Size()
}

// auditEntries returns the audit log's entries after mark.
func auditEntries(mark int64) []auditEntry {
	GinkgoHelper()
	data, err := os.ReadFile(auditLog)
	Expect(err).NotTo(HaveOccurred())
	var out []auditEntry
	dec := json.NewDecoder(bytes.NewReader(data[mark:]))
	for {
		var e auditEntry
		if err := dec.Decode(&e); err != nil {
			return out
		}
		out = append(out, e)
	}
}

// auditedWrites returns the writes after mark, by anyone, to the objects a dry run of a VM in
// ns could touch: the namespace's objects (Evaluations aside, which store nothing), the
// Namespace itself, the ClusterNetwork, pools and policies.
func auditedWrites(mark int64, ns, network string) []string {
	GinkgoHelper()
	var out []string
	for _, e := range auditEntries(mark) {
		r := e.ObjectRef
		inScope := r.Namespace == ns && r.Resource != dryrunv1.Resource ||
			r.Namespace == "" && (r.Resource == "namespaces" && r.Name == ns || r.Resource == "clusternetworks" && r.Name == network ||
				r.Resource == "clusteripaddresspools" && r.Name == network+"-pool" || r.Resource == "clusteripampolicies")
		if inScope {
			out = append(out, fmt.Sprintf("%s %s/%s %s/%s", e.Verb, r.Resource, r.Subresource, r.Namespace, r.Name))
		}
	}
	return out
}

// auditedEvaluations counts the Evaluations created in ns after mark.
func auditedEvaluations(mark int64, ns string) int {
	n := 0
	for _, e := range auditEntries(mark) {
		if e.Verb == "create" && e.ObjectRef.Resource == dryrunv1.Resource && e.ObjectRef.Namespace == ns {
			n++
		}
	}
	return n
}

// drHoldPolicy is a candidate policy that skips every interface.
const drHoldPolicy = `{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
 "metadata": {"name": "hold-all"}, "spec": {"priority": 1, "allocation": {"expression": "'Auto'"},
 "skipRules": [{"name": "hold", "expression": "true", "reason": "HeldByCandidate", "message": "held"}]}}`

// drPolicyObject is drHoldPolicy as an object.
func drPolicyObject() map[string]any {
	GinkgoHelper()
	out := map[string]any{}
	Expect(json.Unmarshal([]byte(drHoldPolicy), &out)).To(Succeed())
	return out
}

// startDryRunVMIPAM starts the production wiring with the dry-run API server on a free local
// port, every API request of the manager (and of the server's delegated authorization)
// passing through counter. Without leaderElection it is the suite's vmipam manager; with it,
// a standby: the lease is held by someone else for the whole spec. A timeout other than 0 is
// the server's --dry-run-timeout; options change the server's other options. It returns the
// server, its port and how to stop it.
func startDryRunVMIPAM(served *dryrunserver.Server, counter *drCounter, leaderElection bool, evalTimeout time.Duration,
	options ...func(*apiserver.Options)) (*apiserver.Server, int32, func()) {
	GinkgoHelper()
	cfg := rest.CopyConfig(vmipamConfig) // the chart's ServiceAccount: only it may write records
	cfg.Wrap(counter.wrap)
	opts := ctrl.Options{Scheme: scheme, Cache: reads.CacheOptions(), NewCache: reads.NewCache,
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptrTrue()}}
	if leaderElection {
		opts.LeaderElection, opts.LeaderElectionNamespace, opts.LeaderElectionID = true, "default", drHeldLease(context.Background())
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	registry, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	Expect(err).NotTo(HaveOccurred())
	o, port, err := served.Options(ctx, k8s, counter.wrap)
	Expect(err).NotTo(HaveOccurred())
	o.Authorization.AllowCacheTTL, o.Authorization.DenyCacheTTL = time.Second, time.Second
	if evalTimeout > 0 {
		o.EvaluationTimeout = evalTimeout
	}
	o.Version = drVersion
	for _, change := range options {
		change(o)
	}
	srv, err := controller.SetupDryRun(mgr, registry, o)
	Expect(err).NotTo(HaveOccurred())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(r.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	if !leaderElection {
		mgrMu.Lock()
		vmipamMgr = r
		mgrMu.Unlock()
		return srv, port, stopVMIPAM
	}
	return srv, port, r.stop
}

// drHeldLease creates a Lease in default held by another identity for an hour and returns its
// name: a manager electing with it stays a standby.
func drHeldLease(ctx context.Context) string {
	GinkgoHelper()
	name := fmt.Sprintf("dryrun-standby-%d", time.Now().UnixNano())
	create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}})
	return name
}

// drCounter counts the requests a manager sends to the API server: reads (GET, including
// lists and watches), reviews (SubjectAccessReview and TokenReview creates, which store
// nothing) and writes (everything else).
type drCounter struct {
	mu        sync.Mutex
	written   []string
	reviewed  int
	lastWrite time.Time
}

func (c *drCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return drRoundTripper(func(r *http.Request) (*http.Response, error) {
		c.record(r)
		return rt.RoundTrip(r)
	})
}

func (c *drCounter) record(r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/tokenreviews") || strings.HasSuffix(r.URL.Path, "/subjectaccessreviews")) {
		c.reviewed++
		return
	}
	c.written = append(c.written, r.Method+" "+r.URL.Path)
	c.lastWrite = time.Now()
}

// writesFor returns the writes so far that a dry run about a VM in ns could have made: in ns,
// or to cluster-scoped objects. Other namespaces are left out: specs that ran before share the
// API server, and their cleanup (namespace deletion, policy deletion) keeps the manager busy
// there for a while.
func (c *drCounter) writesFor(ns string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, w := range c.written {
		if strings.Contains(w, "/namespaces/"+ns+"/") || !strings.Contains(w, "/namespaces/") {
			out = append(out, w)
		}
	}
	return out
}

func (c *drCounter) reviews() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reviewed
}

// quiet reports whether the manager has not written for two seconds.
func (c *drCounter) quiet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.lastWrite) > 2*time.Second
}

type drRoundTripper func(*http.Request) (*http.Response, error)

func (f drRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// drSettled waits until neither the manager nor anything else changes the objects the
// controller deals with, and returns their resourceVersions.
func drSettled(ctx context.Context, counter *drCounter, ns, network string) map[string]string {
	GinkgoHelper()
	var rvs map[string]string
	Eventually(func() bool {
		before := drResourceVersions(ctx, ns, network)
		time.Sleep(1500 * time.Millisecond)
		rvs = drResourceVersions(ctx, ns, network)
		return counter.quiet() && equalMaps(before, rvs)
	}, timeout, interval).Should(BeTrue(), "the controller and the stand-ins settle")
	return rvs
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// drResourceVersions returns the resourceVersion of every object of the namespace the
// controller reads or writes, of the namespace itself and of the ClusterNetwork.
func drResourceVersions(ctx context.Context, ns, network string) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	lists := map[string]client.ObjectList{"VirtualMachine": &vmv1.VirtualMachineList{}, "IPAddress": &sdnv1.IPAddressList{},
		"Pod": &corev1.PodList{}, "Network": &sdnv1.NetworkList{}, "Event": &corev1.EventList{}}
	for kind, list := range lists {
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(meta.EachListItem(list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				out[kind+"/"+m.GetName()] = m.GetResourceVersion()
			}
			return err
		})).To(Succeed())
	}
	for key, obj := range map[string]client.Object{"Namespace/" + ns: &corev1.Namespace{}, "ClusterNetwork/" + network: &sdnv1.ClusterNetwork{}} {
		Expect(k8s.Get(ctx, client.ObjectKey{Name: strings.SplitN(key, "/", 2)[1]}, obj)).To(Succeed())
		out[key] = obj.GetResourceVersion()
	}
	return out
}

// drInstallRoles creates the shipped ClusterRoles (once per suite).
func drInstallRoles(ctx context.Context) {
	GinkgoHelper()
	roles, err := rbac.ClusterRoles()
	Expect(err).NotTo(HaveOccurred())
	for _, r := range roles {
		if err := k8s.Create(ctx, r); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

// drServiceAccount creates a ServiceAccount bound to the ClusterRoles — the evaluator role
// with a RoleBinding in ns, the others with ClusterRoleBindings — and returns a client that
// authenticates with a token for it from the TokenRequest API.
func drServiceAccount(ctx context.Context, ns, name string, roles ...string) client.Client {
	GinkgoHelper()
	create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	for _, role := range roles {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		if role == rbac.ClusterRoleEvaluator {
			create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: ref, Subjects: subject})
			continue
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-" + role}, RoleRef: ref, Subjects: subject}
		create(ctx, crb)
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, crb))).To(Succeed()) })
	}
	return drClient(drConfigOf(ctx, ns, name))
}

// drConfigOf is a client configuration that authenticates as the ServiceAccount ns/name
// with a token from the TokenRequest API.
func drConfigOf(ctx context.Context, ns, name string) *rest.Config {
	GinkgoHelper()
	cs, err := kubernetes.NewForConfig(testEnv.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	cfg := rest.AnonymousClientConfig(testEnv.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// drClient is a client of the API server with cfg's credentials that knows Evaluations (its
// REST mapping comes from the API server's discovery, which includes the aggregated group).
func drClient(cfg *rest.Config) client.Client {
	GinkgoHelper()
	s := runtime.NewScheme()
	Expect(dryrunv1.AddToScheme(s)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: s})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// drEvaluation is an Evaluation in ns of vm with the objects.
func drEvaluation(ns string, vm *vmv1.VirtualMachine, objects ...map[string]any) *dryrunv1.Evaluation {
	GinkgoHelper()
	ev := &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: dryrunv1.EvaluationSpec{VM: &runtime.RawExtension{Raw: []byte(drJSON(drManifest(vm)))}}}
	for _, o := range objects {
		ev.Spec.Objects = append(ev.Spec.Objects, runtime.RawExtension{Raw: []byte(drJSON(o))})
	}
	return ev
}

// drCreate creates ev as c, expects 201 and returns the answer.
func drCreate(ctx context.Context, c client.Client, ev *dryrunv1.Evaluation) *dryrunv1.EvaluationStatus {
	GinkgoHelper()
	Expect(c.Create(ctx, ev)).To(Succeed())
	return &ev.Status
}

// drCreateErr creates ev as c and returns the error.
func drCreateErr(ctx context.Context, c client.Client, ev *dryrunv1.Evaluation) error {
	return c.Create(ctx, ev)
}

func drManifest(vm *vmv1.VirtualMachine) *vmv1.VirtualMachine {
	vm = vm.DeepCopy()
	vm.ManagedFields = nil
	vm.APIVersion, vm.Kind = vmv1.GroupVersion.String(), "VirtualMachine"
	return vm
}

func drJSON(v any) string {
	GinkgoHelper()
	data, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// drTyped is obj as a manifest of the SDN kind.
func drTyped(obj client.Object, kind string) map[string]any {
	GinkgoHelper()
	obj.GetObjectKind().SetGroupVersionKind(sdnv1.GroupVersion.WithKind(kind))
	data, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]any{}
	Expect(json.Unmarshal(data, &out)).To(Succeed())
	return out
}

// drMetric sums the series of a vmipam metric whose label has the value.
func drMetric(name, label, value string) float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// drVersion is the version the suite's dry-run servers publish.
const drVersion = "v0.0.0-integration"

// drReaders are the test's stand-ins for the read roles the virtualization platform and the
// SDN module give a namespace's users — what an Evaluation reads about a VM —, and the chart's
// record viewer, which the chart aggregates into view.
var drReaders = []string{"vmipam-test:vm-reader", "vmipam-test:network-reader", "vmipam-test:ipam-reader", rbac.ClusterRoleRecordViewer}

// drReaderRoles creates the ClusterRoles of drReaders (once per suite).
func drReaderRoles(ctx context.Context) {
	GinkgoHelper()
	read := []string{"get", "list"}
	for name, rules := range map[string][]rbacv1.PolicyRule{
		"vmipam-test:vm-reader": {{APIGroups: []string{vmv1.GroupVersion.Group}, Resources: []string{"virtualmachines"}, Verbs: read}},
		"vmipam-test:network-reader": {{APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: read},
			{APIGroups: []string{sdnv1.GroupVersion.Group}, Resources: []string{"clusternetworks", "clusteripaddresspools", "networks", "ipaddresspools"}, Verbs: read}},
		"vmipam-test:ipam-reader":   {{APIGroups: []string{sdnv1.GroupVersion.Group}, Resources: []string{"ipaddresses"}, Verbs: read}},
		"vmipam-test:policy-reader": {{APIGroups: []string{policyv1.GroupVersion.Group}, Resources: []string{"clusteripampolicies"}, Verbs: read}},
	} {
		if err := k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

// drBind binds the ClusterRoles to subject cluster-wide.
func drBind(ctx context.Context, subject rbacv1.Subject, roles ...string) {
	GinkgoHelper()
	for _, role := range roles {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "dryrun-"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}, Subjects: []rbacv1.Subject{subject}}
		create(ctx, crb)
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, crb))).To(Succeed()) })
	}
}

// drWarnings collects the warnings the API server sends.
type drWarnings struct {
	mu   sync.Mutex
	seen []string
}

// HandleWarningHeader records a warning.
func (w *drWarnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *drWarnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

func (w *drWarnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = nil
}
