package integration

import (
	"context"
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	policywebhook "github.com/vmipam/vmipam/controller/webhook"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// The suite's vmipam manager does not serve the admission webhook, and no
// ValidatingWebhookConfiguration is installed outside the container below: every other spec
// runs as if the webhook were unavailable, which failurePolicy Ignore admits. This container
// serves the webhook with the production wiring (SetupWebhookWithManager on a manager whose
// webhook server listens where envtest's API server can reach it) and installs the
// production configuration (policywebhook.Configuration), then removes both.
var _ = Describe("ClusterIPAMPolicy admission webhook", Ordered, func() {
	var ctx context.Context
	BeforeAll(func() {
		ctx = context.Background()
		serveWebhook()
	})

	It("rejects a policy that does not compile, with the field path of every error", func() {
		p := compilingPolicy(uniqueName("typo"), "")
		p.Spec.SkipRules[0].Expression = "ipAdress.exists"
		p.Spec.Hotplug = &v1alpha1.Expression{Expression: "'yes'"}
		err := k8s.Create(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(causeFields(err)).To(ConsistOf("spec.skipRules[0].expression", "spec.hotplug.expression"))
		Expect(err.Error()).To(And(
			ContainSubstring(`ClusterIPAMPolicy.ipam.virtualization.deckhouse.io %q is invalid`, p.Name),
			ContainSubstring("spec.skipRules[0].expression"),
			ContainSubstring("undeclared reference to 'ipAdress'")))
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(p), p))).To(BeTrue(), "nothing was stored")
	})

	It("admits a policy that compiles and rejects an edit that breaks it", func() {
		p := compilingPolicy(uniqueName("edit"), "")
		create(ctx, p)
		DeferCleanup(deletePolicy, p)

		err := tryUpdatePolicy(ctx, p.Name, func(p *v1alpha1.ClusterIPAMPolicy) {
			p.Spec.SkipRules[0].MessageExpression = "'held: ' + vm.nam"
		})
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(causeFields(err)).To(ConsistOf("spec.skipRules[0].messageExpression"))

		Expect(tryUpdatePolicy(ctx, p.Name, func(p *v1alpha1.ClusterIPAMPolicy) {
			p.Spec.SkipRules[0].MessageExpression = "'held: ' + vm.name"
		})).To(Succeed())
	})

	It("admits a policy while the webhook is off; once it is back, labels of the broken policy still change", func() {
		restore := webhookOff(ctx)
		p := compilingPolicy(uniqueName("off"), "")
		p.Spec.SkipRules[0].Expression = "ipAdress.exists"
		create(ctx, p)
		DeferCleanup(deletePolicy, p)
		Eventually(func() *metav1.Condition { return policyReady(ctx, p.Name) }, timeout, interval).Should(And(
			HaveField("Reason", v1alpha1.ReasonCompilationFailed),
			HaveField("Message", ContainSubstring("spec.skipRules[0].expression"))))

		restore()
		Expect(tryUpdatePolicy(ctx, p.Name, func(p *v1alpha1.ClusterIPAMPolicy) {
			p.Labels = map[string]string{"team": "network"}
		})).To(Succeed(), "a metadata-only update is not blocked by the broken spec")
		err := tryUpdatePolicy(ctx, p.Name, func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Priority++ })
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a spec update must compile, got %v", err)
	})
})

// serveWebhook starts a manager serving only the policy webhook and installs its
// configuration; both are removed when the calling container or spec ends. It returns once
// the API server rejects a broken policy.
func serveWebhook() {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{Scheme: scheme,
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: crwebhook.NewServer(testEnv.WebhookServerOptions())})
	Expect(err).NotTo(HaveOccurred())
	compiler, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	Expect(err).NotTo(HaveOccurred())
	Expect(policywebhook.SetupWebhookWithManager(mgr, compiler)).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	DeferCleanup(func() {
		cancel()
		<-done
	})
	Eventually(func() error { return mgr.GetWebhookServer().StartedChecker()(nil) }, timeout, interval).Should(Succeed())
	installWebhook()
	DeferCleanup(func(ctx context.Context) {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: policywebhook.ConfigurationName}}))).To(Succeed())
	})
}

// installWebhook installs the production webhook configuration pointing at the local server
// and waits until the API server enforces it.
func installWebhook() {
	GinkgoHelper()
	cfg := policywebhook.Configuration(policywebhook.ServiceClientConfig("vmipam", "vmipam-webhook", 0, nil))
	Expect(testEnv.InstallWebhooks(cfg)).To(Succeed())
	probe := compilingPolicy(uniqueName("probe"), "")
	probe.Spec.SkipRules[0].Expression = "ipAdress.exists"
	Eventually(func() error { return k8s.Create(context.Background(), probe, client.DryRunAll) }, timeout, interval).
		Should(Satisfy(apierrors.IsInvalid), "the API server calls the webhook")
}

// webhookOff deletes the webhook configuration, if installed, until the returned function
// (also run when the spec ends) puts it back. While it is off the API server admits every
// policy, as it does when the webhook is unavailable (failurePolicy Ignore).
func webhookOff(ctx context.Context) (restore func()) {
	GinkgoHelper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := k8s.Get(ctx, client.ObjectKey{Name: policywebhook.ConfigurationName}, cfg)
	if apierrors.IsNotFound(err) {
		return func() {}
	}
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Delete(ctx, cfg)).To(Succeed())
	probe := compilingPolicy(uniqueName("probe"), "")
	probe.Spec.SkipRules[0].Expression = "ipAdress.exists"
	Eventually(func() error { return k8s.Create(ctx, probe, client.DryRunAll) }, timeout, interval).
		Should(Succeed(), "the API server stops calling the webhook")
	restored := false
	restore = func() {
		if !restored {
			restored = true
			installWebhook()
		}
	}
	DeferCleanup(restore)
	return restore
}

// compilingPolicy returns a policy that compiles and governs only namespace ns ("" governs
// no namespace): it skips every interface there with reason HeldByPolicy and message.
func compilingPolicy(name, ns string, message ...string) *v1alpha1.ClusterIPAMPolicy {
	msg := "held by policy " + name
	if len(message) > 0 {
		msg = message[0]
	}
	if ns == "" {
		ns = "no-such-namespace-" + name
	}
	return &v1alpha1.ClusterIPAMPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterIPAMPolicySpec{
			Priority: 10,
			Match: v1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
			Allocation: &v1alpha1.Expression{Expression: "'Auto'"},
			SkipRules: []v1alpha1.SkipRule{{Name: "hold", Expression: "true", Reason: "HeldByPolicy",
				MessageExpression: fmt.Sprintf("%q", msg)}},
		},
	}
}

// uniqueName returns a policy name unique in the suite.
func uniqueName(prefix string) string {
	policySeq++
	return fmt.Sprintf("it-%s-%d", prefix, policySeq)
}

var policySeq int

// deletePolicy deletes p if it still exists.
func deletePolicy(ctx context.Context, p *v1alpha1.ClusterIPAMPolicy) {
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, p))).To(Succeed())
}

// policyReady returns the policy's Ready condition, or nil.
func policyReady(ctx context.Context, name string) *metav1.Condition {
	p := &v1alpha1.ClusterIPAMPolicy{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
		return nil
	}
	return meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
}

// causeFields returns the field paths of an API error's causes.
func causeFields(err error) []string {
	var out []string
	var s apierrors.APIStatus
	if errors.As(err, &s) && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			out = append(out, c.Field)
		}
	}
	return out
}
