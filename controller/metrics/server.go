package metrics

import (
	"crypto/tls"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ServerOptions configure the manager's metrics endpoint.
type ServerOptions struct {
	// BindAddress is host:port; "0" disables the endpoint.
	BindAddress string
	// Secure serves HTTPS, as kubebuilder v4 scaffolds it: every request is authenticated by
	// the API server (TokenReview of its bearer token) and authorized by it
	// (SubjectAccessReview of "get" on the non-resource URL /metrics). A ServiceAccount bound
	// to the metrics-reader ClusterRole may scrape; others get 403, a request without
	// credentials 401. The controller needs create on tokenreviews and subjectaccessreviews.
	Secure bool
	// CertDir holds tls.crt and tls.key, reloaded when they change; empty: a generated
	// self-signed certificate. Only with Secure.
	CertDir string
	// TLSOpts adjust the TLS configuration (e.g. HTTP/1.1 only).
	TLSOpts []func(*tls.Config)
}

// With Secure, the controller asks the API server about each scraper:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Server returns the metrics server options of controller-runtime's manager, and makes a
// certificate in CertDir the "metrics" endpoint of
// vmipam_certificate_expiration_timestamp_seconds.
func (o ServerOptions) Server() metricsserver.Options {
	s := metricsserver.Options{BindAddress: o.BindAddress}
	if !o.Secure {
		return s
	}
	s.SecureServing, s.CertDir, s.TLSOpts = true, o.CertDir, o.TLSOpts
	s.FilterProvider = filters.WithAuthenticationAndAuthorization
	if o.CertDir != "" {
		WatchCertificate("metrics", filepath.Join(o.CertDir, "tls.crt"))
	}
	return s
}
