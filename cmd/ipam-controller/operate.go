package main

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/controller/vm"
)

// operation are the settings an operator tunes: how metrics are served, HTTP/2, concurrency
// and the leader lease.
type operation struct {
	metricsSecure           bool
	metricsCertDir          string
	enableHTTP2             bool
	maxConcurrentReconciles int
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
}

func (o *operation) bind(f *pflag.FlagSet) {
	f.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS, only to callers the API server authenticates (TokenReview) and authorizes (SubjectAccessReview: get on the non-resource URL /metrics, e.g. the metrics-reader ClusterRole)")
	f.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory holding tls.crt and tls.key for the metrics endpoint, reloaded when they change (default: a generated self-signed certificate)")
	f.BoolVar(&o.enableHTTP2, "enable-http2", false, "serve HTTP/2 on the webhook, metrics and dry-run API endpoints; off by default because of the HTTP/2 Stream Cancellation and Rapid Reset CVEs (GHSA-qppj-fm5r-hxr3, GHSA-4374-p667-p6c8)")
	f.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", vm.DefaultMaxConcurrentReconciles, "objects each controller reconciles at once (VirtualMachines, ClusterIPAMPolicies); a reconcile mostly waits on the API server, so this bounds how many hotplugs go through at once (docs/SCALING.md)")
	f.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long non-leaders wait before taking over a lease that is not renewed")
	f.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing its lease before it gives up leading (and exits)")
	f.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often leader-election clients retry acquiring or renewing the lease")
}

// apply sets the manager options o governs. metricsAddr is --metrics-bind-address.
func (o *operation) apply(opts *ctrl.Options, metricsAddr string) {
	opts.Metrics = metrics.ServerOptions{BindAddress: metricsAddr, Secure: o.metricsSecure,
		CertDir: o.metricsCertDir, TLSOpts: o.tlsOpts()}.Server()
	opts.Controller.MaxConcurrentReconciles = o.maxConcurrentReconciles
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = &o.leaseDuration, &o.renewDeadline, &o.retryPeriod
}

// tlsOpts are the TLS settings of the webhook and metrics servers: HTTP/1.1 only unless
// --enable-http2.
func (o *operation) tlsOpts() []func(*tls.Config) {
	if o.enableHTTP2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}

// watchCertificates exports the expiry of the webhook's and the dry-run endpoint's serving
// certificates (vmipam_certificate_expiration_timestamp_seconds); a generated self-signed
// certificate has no file and is not exported.
func (o *operation) watchCertificates(webhookPort int, webhookCertDir, dryRunCertFile string) {
	if webhookPort != 0 {
		if webhookCertDir == "" { // controller-runtime's default
			webhookCertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
		}
		metrics.WatchCertificate("webhook", filepath.Join(webhookCertDir, "tls.crt"))
	}
	metrics.WatchCertificate("dryrun", dryRunCertFile)
}
