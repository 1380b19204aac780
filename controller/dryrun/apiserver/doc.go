// Package apiserver serves the dry-run API (controller/dryrun/v1alpha1, DESIGN.md §5) from
// inside the controller: a k8s.io/apiserver GenericAPIServer, registered with the cluster's
// API server by an APIService, on every replica (it writes nothing, so it needs no
// leadership).
//
// What the library does, and vmipam does not: TLS serving, content negotiation (JSON, YAML,
// protobuf-free), the body limit (3 MiB, 413), the request timeout, discovery and OpenAPI (v2
// and v3, so that `kubectl explain` and kubectl's field validation work), Status responses,
// and delegated authentication and authorization:
//
//   - Authentication is the API server's: requests arrive through the aggregator, which
//     authenticated the user by whatever means the cluster has (tokens, client certificates,
//     OIDC, exec plugins) and passes the identity in front-proxy headers (X-Remote-User,
//     X-Remote-Group, X-Remote-Extra-*), vouched for by its proxy client certificate, whose
//     CA and header names the library reads from kube-system/extension-apiserver-authentication.
//     Only that is accepted: no TokenReview, no client certificates of users — no user
//     credential ever reaches vmipam.
//   - Authorization asks the API server (SubjectAccessReview): create evaluations in the
//     namespace (the library's filter), and in Create, for a VM named by
//     spec.virtualMachineName, get on that virtualmachine, and for spec.policies the custom
//     verb evaluate on clusteripampolicies.
//
// After authorization, before anything reads the body, evaluations wait for one of
// --dry-run-max-in-flight seats in a fair queue with one flow per user (fairQueue: the
// library's API Priority and Fairness queue set), so that one caller cannot starve another
// and no more bodies than seats are read and decoded at once; what cannot wait is a 429 with
// Retry-After.
//
// Create decodes spec with the dry-run Engine (a malformed spec is a 422 Invalid with field
// paths such as spec.vm.spec.networks[1].type), evaluates it against the manager's cache and
// the installed policies (or the candidate ones), and returns the Evaluation with its
// status (201). An evaluation past its deadline (Options.EvaluationTimeout, or the request's
// own timeout) is a 504. Nothing is stored and nothing is written.
package apiserver
