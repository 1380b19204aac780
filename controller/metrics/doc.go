// Package metrics defines vmipam's Prometheus metrics and registers them with
// controller-runtime's registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), so the
// manager's metrics server exposes them next to controller-runtime's own. Names follow the
// Prometheus conventions: counters end in _total, units are base units (_seconds), state is
// a gauge an alert can compare.
//
// State, as last decided by the reconcilers of the leader (kept incrementally, so a scrape
// costs the number of series, not the number of VMs):
//
//	vmipam_interfaces{state, reason, mode}
//	    additional VM interfaces by state (attached, pending, skipped), skip reason ("" when
//	    attached) and mode (Auto, Static, None, Unknown). pending: waiting for SDN
//	    (IPAddressPending, IPAddressNotAllocated, PoolExhausted, NetworkNotReady).
//	vmipam_policy_ready{policy}
//	    1 when the ClusterIPAMPolicy's current generation compiled and serves.
//	vmipam_policy_serving_stale{policy}
//	    1 when it does not compile and an older generation serves instead.
//	vmipam_pool_exhausted_interfaces{network_kind, network_namespace, network}
//	    interfaces waiting for an address because the network's pool is exhausted.
//	vmipam_build_info{version, revision, go_version}
//	    always 1 (every replica).
//
// Events (every replica that handles them):
//
//	vmipam_decisions_total{source, outcome, reason}
//	    one per interface decision: source is "controller" (a reconcile) or "dryrun" (the
//	    dry-run API); outcome is the allocation of an attached interface (Auto, Static,
//	    None), Skipped, or Error (a policy could not be evaluated: reason PolicyError);
//	    reason is the skip reason, "" when attached. A reconcile of an unchanged VM decides
//	    again, so this counts work done, not problems present: alert on vmipam_interfaces.
//	vmipam_audit_decisions_total{source, policy, outcome, reason}
//	    would-be decisions of Audit-mode policies.
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
//	vmipam_certificate_expiration_timestamp_seconds{endpoint}
//	    when the serving certificate of an endpoint (webhook, metrics, dryrun) expires.
//
// A Recorder carries the source label; use Controller in reconcilers and DryRun in the
// dry-run API server. Current holds the state the VM and policy reconcilers record.
package metrics
