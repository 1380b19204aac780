// Package v1alpha1 is the dry-run API, group dryrun.ipam.virtualization.deckhouse.io, version
// v1alpha1 (DESIGN.md §5): one namespaced, create-only resource, evaluations (kind
// Evaluation). As a SubjectAccessReview, an Evaluation is never stored: creating one returns
// it with its status filled in — what one reconcile of the VM in spec would decide and do.
// The controller serves the group through an aggregated API server (controller/dryrun/apiserver);
// the group differs from the CRD group ipam.virtualization.deckhouse.io because an APIService
// and CRDs cannot share a group-version.
//
// The types declare their own fields: none embeds a type of the controller or the evaluator,
// so that no internal change alters what is served. controller/dryrun/convert fills them from
// the reconciler's plan and the evaluator's decisions, in one place; this package links API
// packages only (layering_test.go).
//
// openapi/ holds the OpenAPI schema of Evaluation that controller-gen derives from these
// types (`make generate`), served for `kubectl explain` and kubectl's field validation. It
// has the form of a CustomResourceDefinition because that is what controller-gen writes; it
// is never installed as one.
//
// +groupName=dryrun.ipam.virtualization.deckhouse.io
// +kubebuilder:object:generate=true
package v1alpha1
