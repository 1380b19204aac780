package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

const (
	// Path is the URL path the webhook is served at.
	Path = "/validate-ipam-virtualization-deckhouse-io-v1alpha1-clusteripampolicy"
	// ConfigurationName is the name of the ValidatingWebhookConfiguration Configuration builds.
	ConfigurationName = "vmipam-clusteripampolicy"
	// Name is the name of the webhook inside the configuration.
	Name = "clusteripampolicy.ipam.virtualization.deckhouse.io"
	// TimeoutSeconds bounds one admission call; compiling a policy takes milliseconds.
	TimeoutSeconds = 5
)

// Configuration returns the ValidatingWebhookConfiguration that sends creates and updates of
// ClusterIPAMPolicies to the webhook at clientConfig (see ServiceClientConfig). It is the
// single definition of the webhook's registration, used by tests and deployments alike, so
// that path, resource and policy cannot drift from what SetupWebhookWithManager serves.
//
// failurePolicy is Ignore: when the webhook cannot be reached, the policy is admitted and the
// policy controller reports its compile errors on status instead (see the package doc).
func Configuration(clientConfig admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(),
			Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigurationName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         Name,
			ClientConfig: clientConfig,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{
					admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{v1alpha1.GroupVersion.Group},
					APIVersions: []string{v1alpha1.GroupVersion.Version},
					Resources:   []string{"clusteripampolicies"},
					Scope:       ptr.To(admissionregistrationv1.ClusterScope),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To[int32](TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

// ServiceClientConfig points the webhook at Path on a Service (port 443 when port is 0),
// trusting caBundle (PEM) for its serving certificate.
func ServiceClientConfig(namespace, name string, port int32, caBundle []byte) admissionregistrationv1.WebhookClientConfig {
	ref := &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: name, Path: ptr.To(Path)}
	if port != 0 {
		ref.Port = ptr.To(port)
	}
	return admissionregistrationv1.WebhookClientConfig{Service: ref, CABundle: caBundle}
}
