// Package dryrunserver serves vmipam's dry-run API (controller/dryrun/apiserver) through the
// kube-apiserver of a test environment, as on a cluster: the API server proxies requests for
// dryrun.ipam.virtualization.deckhouse.io to the APIService's Service, an ExternalName
// Service for localhost here (no kube-proxy), verifying the serving certificate against the
// caBundle for the Service's name, and passes the caller's identity in front-proxy headers.
// The integration suite, the golden parity test and the sandbox use it.
package dryrunserver
