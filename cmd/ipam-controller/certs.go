package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// +kubebuilder:rbac:groups="",namespace=vmipam-system,resources=secrets,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;list;watch;update

// certOptions configure the serving certificate the controller manages itself (the chart's
// default; with cert-manager, --cert-secret is empty and none of this runs).
type certOptions struct {
	secret     string   // namespace/name of the Secret holding CA and serving certificate
	dnsNames   []string // the certificate's DNS names; the first is its common name
	dir        string   // where the Secret is mounted (tls.crt, tls.key)
	webhook    string   // ValidatingWebhookConfiguration to inject the CA into
	apiService string   // APIService to inject the CA into ("" for none)
}

func (o *certOptions) bindFlags(f *pflag.FlagSet) {
	f.StringVar(&o.secret, "cert-secret", "", "namespace/name of the Secret in which the controller keeps its own CA and serving certificate, rotated before expiry (empty: the certificate is provided, e.g. by cert-manager)")
	f.StringSliceVar(&o.dnsNames, "cert-dns-names", nil, "DNS names of the serving certificate (<service>.<namespace>.svc of the webhook and the API)")
	f.StringVar(&o.dir, "cert-secret-dir", "", "directory where the --cert-secret Secret is mounted; start-up waits until its files are there")
	f.StringVar(&o.webhook, "cert-inject-webhook", "", "ValidatingWebhookConfiguration whose caBundle is kept at the CA of --cert-secret")
	f.StringVar(&o.apiService, "cert-inject-apiservice", "", "APIService whose caBundle is kept at the CA of --cert-secret")
}

// startCertRotation runs open-policy-agent/cert-controller (as Gatekeeper does) when
// --cert-secret is set: it creates the CA and serving certificate in the Secret, renews them
// 90 days before expiry (checked every 12 hours), and keeps the CA in the webhook
// configuration and APIService. It runs in a manager of its own on every replica, not only
// on the leader, and returns once the Secret's files are mounted in o.dir and the CA is
// injected: the servers of the main manager load their certificate from those files at start
// and reload them when the kubelet updates the mount. The rotation stops with ctx.
func startCertRotation(ctx context.Context, cfg *rest.Config, o certOptions) error {
	if o.secret == "" {
		return nil
	}
	ns, name, ok := strings.Cut(o.secret, "/")
	if !ok || ns == "" || name == "" || len(o.dnsNames) == 0 || o.dir == "" || o.webhook == "" {
		return fmt.Errorf("--cert-secret needs the form namespace/name, with --cert-dns-names, --cert-secret-dir and --cert-inject-webhook")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	webhooks := []rotator.WebhookInfo{{Name: o.webhook, Type: rotator.Validating}}
	if o.apiService != "" {
		webhooks = append(webhooks, rotator.WebhookInfo{Name: o.apiService, Type: rotator.APIService})
	}
	ready := make(chan struct{})
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey: types.NamespacedName{Namespace: ns, Name: name},
		CertDir:   o.dir, CAName: "vmipam-ca", CAOrganization: "vmipam",
		DNSName: o.dnsNames[0], ExtraDNSNames: o.dnsNames[1:],
		IsReady: ready, Webhooks: webhooks, FieldOwner: "vmipam-cert-rotation",
	}); err != nil {
		return fmt.Errorf("certificate rotation: %w", err)
	}
	failed := make(chan error, 1)
	go func() { failed <- mgr.Start(ctx) }()
	select {
	case <-ready:
		go exitWhenStopped(ctx, failed)
		return nil
	case err := <-failed:
		return fmt.Errorf("certificate rotation: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exitWhenStopped ends the process when the rotation stops before ctx does: a replica whose
// certificate is no longer renewed would serve an expired one; a restart starts it afresh.
func exitWhenStopped(ctx context.Context, failed <-chan error) {
	err := <-failed
	if ctx.Err() != nil {
		return
	}
	fmt.Fprintln(os.Stderr, "ipam-controller: certificate rotation stopped:", err)
	os.Exit(1)
}
