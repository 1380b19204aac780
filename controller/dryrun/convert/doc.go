// Package convert is the one place where the controller's and the evaluator's types become
// the served dry-run API (controller/dryrun/v1alpha1): Status presents a reconcile's plan
// (controller/plan) as an Evaluation's status — per interface the evaluator's Decision with
// its trace and input, the actions, and what the VM would look like once its record is
// applied. The dry-run engine (controller/dryrun), and so the API server and `ipamctl
// evaluate`, build every status through it.
//
// The API types declare their own fields and JSON names, so no internal change alters what is
// served: renaming an internal field breaks the build here, not the wire format; a field added
// to an internal type is served once the API declares it and it is converted here; and
// TestConvertFillsEveryField fails when a conversion leaves a field of an API type unset.
package convert
