package webhook_test

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller/webhook"
)

// The webhook's registration for a controller reached through Service vmipam-webhook in
// namespace d8-vmipam; the CA bundle is left for cert-manager's CA injector (or set it).
func ExampleConfiguration() {
	cfg := webhook.Configuration(webhook.ServiceClientConfig("d8-vmipam", "vmipam-webhook", 443, nil))
	out, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(out))
	// Output:
	// apiVersion: admissionregistration.k8s.io/v1
	// kind: ValidatingWebhookConfiguration
	// metadata:
	//   name: vmipam-clusteripampolicy
	// webhooks:
	// - admissionReviewVersions:
	//   - v1
	//   clientConfig:
	//     service:
	//       name: vmipam-webhook
	//       namespace: d8-vmipam
	//       path: /validate-ipam-virtualization-deckhouse-io-v1alpha1-clusteripampolicy
	//       port: 443
	//   failurePolicy: Ignore
	//   matchPolicy: Equivalent
	//   name: clusteripampolicy.ipam.virtualization.deckhouse.io
	//   rules:
	//   - apiGroups:
	//     - ipam.virtualization.deckhouse.io
	//     apiVersions:
	//     - v1alpha1
	//     operations:
	//     - CREATE
	//     - UPDATE
	//     resources:
	//     - clusteripampolicies
	//     scope: Cluster
	//   sideEffects: None
	//   timeoutSeconds: 5
}
