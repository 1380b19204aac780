// Package metrics defines vmipam's Prometheus metrics and registers them with
// controller-runtime's registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), so the
// manager's metrics server exposes them next to controller-runtime's own:
//
//	vmipam_decisions_total{source, outcome, reason}
//	    one per interface decision: source is "controller" (a reconcile) or "dryrun" (the
//	    dry-run API); outcome is the allocation of an attached interface (Auto, Static,
//	    None), Skipped, or Error (a policy could not be evaluated: reason PolicyError);
//	    reason is the skip reason, "" when attached.
//	vmipam_evaluation_duration_seconds{source}
//	    wall time of one evaluation: for the dry-run API, observing the VM's world and
//	    deciding every interface of one request.
//	vmipam_policy_compile_errors_total{source}
//	    policies that did not compile: candidate policies of dry-run requests, or (source
//	    "controller") installed policies whose new generation does not compile.
//	vmipam_dryrun_requests_total{code}
//	    Evaluations answered by the dry-run API server, by HTTP status code (201, 403, 422,
//	    504, …); requests the API server refused before forwarding are in its own metrics.
//
// A Recorder carries the source label; use Controller in reconcilers and DryRun in the
// dry-run API server.
package metrics
