// Package endpoint serves the dry-run evaluation API of DESIGN.md §5 from the controller:
// POST /apis/dryrun/v1alpha1/evaluate over HTTPS, answered by a dryrun.Engine from the
// manager's cache and the controller's policy snapshot. It never writes to the cluster: the
// Handler gets a client.Reader, and the only requests it makes to the API server are
// TokenReviews and SubjectAccessReviews.
//
// Every request is, in this order:
//
//   - authenticated by the API server (TokenReview of the bearer token, through
//     k8s.io/apiserver's delegating authenticator; optionally a client certificate signed by
//     a configured CA). No credentials, or credentials the API server rejects: 401.
//   - bounded: a body over Options.MaxBodyBytes (3 MiB by default) is 413, without reading
//     it when Content-Length says so; Options.Timeout (10 s) bounds the whole answer, and a
//     request that runs out of it is 504.
//   - decoded and validated (dryrun.Engine.Decode): malformed input is 400 with a
//     metav1.Status whose message and details.causes name the JSON path of every problem
//     — of the VM, of every candidate policy (schema and compile errors) and of every
//     object, all at once.
//   - authorized by the API server (SubjectAccessReview, delegating authorizer), as soon as
//     Decode knows the VM's namespace and before it compiles candidate policies: the caller
//     must be allowed to create virtualmachines (virtualization.deckhouse.io) in the VM's
//     namespace, and, when the request carries candidate policies, to create
//     clusteripampolicies (ipam.virtualization.deckhouse.io). Otherwise 403 (also for a
//     request with other problems, as the API server authorizes before it validates). The
//     ClusterRoles in crds/rbac grant exactly these.
//   - evaluated (dryrun.Engine.Evaluate): 200 with a dryrun.Result.
//
// Errors are metav1.Status bodies, as the API server's. Answers are JSON, or YAML when the
// Accept header asks for it. /healthz and /readyz on the same port are unauthenticated; the
// Server is also a readiness check for the manager (ReadyCheck): ready once it serves and
// the installed policies are loaded.
package endpoint
