package integration

import (
	"context"
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	gomegatypes "github.com/onsi/gomega/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/policy"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
)

// Every policy here governs only its spec's namespace (match.namespaceSelector on
// kubernetes.io/metadata.name) and is deleted when the spec ends: policies are cluster-scoped
// and the suite's VMs share one API server. The webhook is off in these specs (webhookOff),
// as it is while the controller serving it is unavailable.
var _ = Describe("ClusterIPAMPolicy controller", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.41.0.0/24")
		webhookOff(ctx)
	})
	skipMessage := func(vm string) func() string {
		return func() string { return describe(networkReady(ctx, ns, vm)) }
	}

	It("reports a policy created while the webhook is off as CompilationFailed with the path, and does not use it", func() {
		p := compilingPolicy(uniqueName("never"), ns)
		p.Spec.SkipRules[0].Expression = "ipAdress.exists"
		create(ctx, p)
		DeferCleanup(deletePolicy, p)

		Eventually(policyStatus(ctx, p.Name), timeout, interval).Should(policyState(1, 0,
			readyFalse("generation 1 does not compile: spec.skipRules[0].expression: ", "undeclared reference to 'ipAdress'",
				"the policy is not used until it compiles")))
		create(ctx, build.VM(ns, "web", build.OnClusterNetwork(corp, "")))
		Eventually(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).ShouldNot(BeEmpty(), "the built-in default decides, not the broken policy")
		Expect(skipMessage("web")()).To(HavePrefix("True/"))
	})

	It("keeps the last good generation serving when an edit does not compile, also across a controller restart", func() {
		p := compilingPolicy(uniqueName("lastgood"), ns, "held by generation 1")
		create(ctx, p)
		DeferCleanup(deletePolicy, p)
		Eventually(policyStatus(ctx, p.Name), timeout, interval).Should(policyState(1, 1, readyTrue()))
		create(ctx, build.VM(ns, "a", build.OnClusterNetwork(corp, "")))
		Eventually(skipMessage("a"), timeout, interval).Should(ContainSubstring("HeldByPolicy: held by generation 1"))

		By("an edit that does not compile: generation 2")
		updatePolicy(ctx, p.Name, func(s *v1alpha1.ClusterIPAMPolicySpec) {
			s.SkipRules[0].Expression = "ipAdress.exists"
			s.SkipRules[0].MessageExpression = `"held by generation 2"`
		})
		Eventually(policyStatus(ctx, p.Name), timeout, interval).Should(policyState(2, 1,
			readyFalse("generation 2 does not compile: spec.skipRules[0].expression: ", "generation 1 keeps serving")))
		Expect(lastGoodGeneration(ctx, p.Name)).To(Equal(int64(1)))
		create(ctx, build.VM(ns, "b", build.OnClusterNetwork(corp, "")))
		Eventually(skipMessage("b"), timeout, interval).Should(ContainSubstring("HeldByPolicy: held by generation 1"),
			"a VM decided after the failed edit follows generation 1")

		By("restarting the controller: generation 1 is restored from the annotation")
		stopVMIPAM()
		startVMIPAM()
		create(ctx, build.VM(ns, "c", build.OnClusterNetwork(corp, "")))
		Eventually(skipMessage("c"), timeout, interval).Should(ContainSubstring("HeldByPolicy: held by generation 1"),
			"a VM decided after the restart follows generation 1")
		Consistently(policyStatus(ctx, p.Name), "1s", interval).Should(policyState(2, 1,
			readyFalse("spec.skipRules[0].expression", "generation 1 keeps serving")))
		Expect(skipMessage("a")()).To(ContainSubstring("HeldByPolicy: held by generation 1"))

		By("an edit that compiles: generation 3 serves")
		updatePolicy(ctx, p.Name, func(s *v1alpha1.ClusterIPAMPolicySpec) {
			s.SkipRules[0].Expression = "true"
			s.SkipRules[0].MessageExpression = `"held by generation 3"`
		})
		Eventually(policyStatus(ctx, p.Name), timeout, interval).Should(policyState(3, 3, readyTrue()))
		Expect(lastGoodGeneration(ctx, p.Name)).To(Equal(int64(3)))
		for _, vm := range []string{"a", "b", "c"} {
			Eventually(skipMessage(vm), timeout, interval).Should(ContainSubstring("HeldByPolicy: held by generation 3"))
		}
	})

	It("rewrites the last good record when an admin removes it", func() {
		p := compilingPolicy(uniqueName("record"), ns)
		create(ctx, p)
		DeferCleanup(deletePolicy, p)
		Eventually(func() int64 { return lastGoodGeneration(ctx, p.Name) }, timeout, interval).Should(Equal(int64(1)))

		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := getPolicy(ctx, p.Name)
			delete(cur.Annotations, policy.AnnotationLastGood)
			return k8s.Update(ctx, cur)
		})).To(Succeed())
		Eventually(func() int64 { return lastGoodGeneration(ctx, p.Name) }, timeout, interval).Should(Equal(int64(1)))
		Expect(getPolicy(ctx, p.Name).Generation).To(Equal(int64(1)), "metadata writes do not bump the generation")
	})
})

var _ = Describe("Default policies", func() {
	It("are created at start-up when absent, and an admin's edit survives ApplyDefaults", func() {
		ctx := context.Background()
		shipped, err := policies.Builtin()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(resetDefaultPolicy, shipped)

		By("the suite's controller created it at start-up and it compiled")
		Eventually(func() *metav1.Condition { return policyReady(ctx, shipped.Name) }, timeout, interval).
			Should(HaveField("Reason", v1alpha1.ReasonCompiled))
		Expect(getPolicy(ctx, shipped.Name).Spec).To(Equal(shipped.Spec))

		By("an admin's edit is kept by the next start-up")
		updatePolicy(ctx, shipped.Name, func(s *v1alpha1.ClusterIPAMPolicySpec) {
			s.Variables = append(s.Variables, v1alpha1.NamedExpression{Name: "editedByAdmin", Expression: "true"})
		})
		edited := getPolicy(ctx, shipped.Name)
		Expect(policy.ApplyDefaults(ctx, k8s)).To(Succeed())
		after := getPolicy(ctx, shipped.Name)
		Expect(after.Generation).To(Equal(edited.Generation))
		Expect(after.Spec).To(Equal(edited.Spec))

		By("a deleted default comes back at the next start-up")
		Expect(k8s.Delete(ctx, after)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: shipped.Name}, &v1alpha1.ClusterIPAMPolicy{}))
		}, timeout, interval).Should(BeTrue())
		Expect(policy.ApplyDefaults(ctx, k8s)).To(Succeed())
		Expect(getPolicy(ctx, shipped.Name).Spec).To(Equal(shipped.Spec))
		Eventually(policyStatus(ctx, shipped.Name), timeout, interval).Should(policyState(1, 1, readyTrue()))
	})
})

// resetDefaultPolicy puts the shipped default policy back if a spec left it edited or absent.
func resetDefaultPolicy(ctx context.Context, shipped *v1alpha1.ClusterIPAMPolicy) {
	cur := &v1alpha1.ClusterIPAMPolicy{}
	err := k8s.Get(ctx, client.ObjectKey{Name: shipped.Name}, cur)
	if err == nil && equalSpec(cur.Spec, shipped.Spec) {
		return
	}
	if err == nil {
		Expect(k8s.Delete(ctx, cur)).To(Succeed())
		Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(cur), cur)) },
			timeout, interval).Should(BeTrue())
	}
	Expect(policy.ApplyDefaults(ctx, k8s)).To(Succeed())
}

func equalSpec(a, b v1alpha1.ClusterIPAMPolicySpec) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func getPolicy(ctx context.Context, name string) *v1alpha1.ClusterIPAMPolicy {
	GinkgoHelper()
	p := &v1alpha1.ClusterIPAMPolicy{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, p)).To(Succeed())
	return p
}

// updatePolicy applies change to the live policy's spec, retrying on conflicts with the
// controller's own writes (status, the last good record).
func updatePolicy(ctx context.Context, name string, change func(*v1alpha1.ClusterIPAMPolicySpec)) {
	GinkgoHelper()
	Expect(tryUpdatePolicy(ctx, name, func(p *v1alpha1.ClusterIPAMPolicy) { change(&p.Spec) })).To(Succeed())
}

// tryUpdatePolicy applies change to the live policy, retrying on conflicts only, and returns
// the outcome of the last attempt.
func tryUpdatePolicy(ctx context.Context, name string, change func(*v1alpha1.ClusterIPAMPolicy)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.ClusterIPAMPolicy{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			return err
		}
		change(p)
		return k8s.Update(ctx, p)
	})
}

// policyStatus polls the policy's status (with metadata.generation, for policyState).
func policyStatus(ctx context.Context, name string) func() *v1alpha1.ClusterIPAMPolicy {
	return func() *v1alpha1.ClusterIPAMPolicy {
		p := &v1alpha1.ClusterIPAMPolicy{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			return nil
		}
		return p
	}
}

// policyState matches a policy at generation observed (also metadata.generation) serving
// generation serving, with a Ready condition matching ready.
func policyState(observed, serving int64, ready gomegatypes.GomegaMatcher) gomegatypes.GomegaMatcher {
	return And(
		Not(BeNil()),
		HaveField("Generation", observed),
		HaveField("Status.ObservedGeneration", observed),
		HaveField("Status.ServingGeneration", serving),
		HaveField("Status.Conditions", ContainElement(And(HaveField("Type", v1alpha1.ConditionReady),
			HaveField("ObservedGeneration", observed), ready))))
}

func readyTrue() gomegatypes.GomegaMatcher {
	return And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", v1alpha1.ReasonCompiled))
}

func readyFalse(messageParts ...string) gomegatypes.GomegaMatcher {
	m := []gomegatypes.GomegaMatcher{HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", v1alpha1.ReasonCompilationFailed)}
	for _, part := range messageParts {
		m = append(m, HaveField("Message", ContainSubstring(part)))
	}
	return And(m...)
}

// lastGoodGeneration returns the generation recorded in the policy's last good annotation,
// 0 when there is none.
func lastGoodGeneration(ctx context.Context, name string) int64 {
	GinkgoHelper()
	raw, ok := getPolicy(ctx, name).Annotations[policy.AnnotationLastGood]
	if !ok {
		return 0
	}
	var lg struct {
		Generation int64 `json:"generation"`
	}
	Expect(json.Unmarshal([]byte(raw), &lg)).To(Succeed())
	return lg.Generation
}
