// Package webhook serves the validating admission webhook for ClusterIPAMPolicy: a policy
// whose expressions do not compile (a misspelled field, a wrong result type, a worst-case cost
// above the limit, …) is rejected with every error's field path, by the same compiler the
// policy controller uses, so most mistakes never reach the cluster.
//
// On create every expression compiles in the NewExpressions environment; on update an
// expression unchanged at the same path compiles in the StoredExpressions environment, so a
// stored policy stays editable after a CEL library is retired. An update that leaves the spec
// as it is (labels, annotations, finalizers, the controller's own last-good record) is always
// allowed, also for a policy that does not compile: otherwise a policy admitted while the
// webhook was unavailable could not even be labelled.
//
// The webhook is a convenience, not the safety net: Configuration sets failurePolicy Ignore,
// so while the controller (which serves the webhook) is down, policies are admitted
// unchecked and the policy controller reports their compile errors on status (Ready=False,
// CompilationFailed) and keeps the last good generation serving. The webhook therefore never
// blocks policy edits during an outage, e.g. an admin repairing a policy while the
// controller is being rolled out.
//
// The registration is built in Go (Configuration, ServiceClientConfig) rather than kept as
// YAML: the path, resource and failure policy come from the same constants the server
// registers, the envtest suite installs exactly what a deployment installs, and
// ExampleConfiguration prints (and pins) the manifest to paste into a deployment.
package webhook
