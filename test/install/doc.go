// Package install is the install test: it renders the Helm chart (deploy/helm/vmipam) with
// Helm's Go SDK, applies every object to a real kube-apiserver (envtest) by server-side
// apply, and runs the controller binary with the Deployment's arguments, authenticated as
// the chart's ServiceAccount (a TokenRequest token) — no admin credentials — to prove that
// the shipped RBAC, ValidatingAdmissionPolicy, webhook registration, certificates and
// leader election work as installed.
//
// What a cluster would do and this machine cannot is stood in for, and only that: Services
// become ExternalName Services pointing at localhost (there is no kube-proxy; the API server
// still calls the webhook by its Service name, checking the certificate against the injected
// caBundle), a goroutine copies the certificate Secret into each replica's certificate
// directory as the kubelet's Secret volume would, and each replica gets its own ports (pods
// have their own addresses; the Services lead to the first replica's).
package install
