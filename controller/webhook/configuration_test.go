package webhook_test

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/vmipam/vmipam/controller/webhook"
)

func TestConfigurationSendsCreateAndUpdateOfPoliciesToPathAndIgnoresOutages(t *testing.T) {
	cfg := webhook.Configuration(webhook.ServiceClientConfig("vmipam", "vmipam-webhook", 0, []byte("ca")))
	if len(cfg.Webhooks) != 1 {
		t.Fatalf("webhooks = %d, want 1", len(cfg.Webhooks))
	}
	w := cfg.Webhooks[0]
	if *w.ClientConfig.Service.Path != webhook.Path || w.ClientConfig.Service.Port != nil ||
		string(w.ClientConfig.CABundle) != "ca" {
		t.Errorf("clientConfig = %+v", w.ClientConfig)
	}
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("failurePolicy %s, sideEffects %s", *w.FailurePolicy, *w.SideEffects)
	}
	r := w.Rules[0]
	if len(r.Operations) != 2 || r.Resources[0] != "clusteripampolicies" ||
		r.APIGroups[0] != "ipam.virtualization.deckhouse.io" || r.APIVersions[0] != "v1alpha1" {
		t.Errorf("rule = %+v", r)
	}
}
