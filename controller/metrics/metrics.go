package metrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Sources of decisions and evaluations (the source label).
const (
	SourceController = "controller"
	SourceDryRun     = "dryrun"
)

// Outcomes of a decision besides the allocation of an attached interface (the outcome label).
const (
	OutcomeSkipped = "Skipped"
	OutcomeError   = "Error"
)

var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_decisions_total",
		Help: "Interface decisions by source (controller, dryrun), outcome (Auto, Static, None, Skipped, Error) and skip reason.",
	}, []string{"source", "outcome", "reason"})
	evaluationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vmipam_evaluation_duration_seconds",
		Help:    "Wall time of one evaluation (observe and decide every interface of a VM), by source.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"source"})
	compileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_policy_compile_errors_total",
		Help: "Policies that did not compile, by source (controller: installed policies; dryrun: candidate policies of requests).",
	}, []string{"source"})
	auditDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_audit_decisions_total",
		Help: "Would-be decisions of Audit-mode policies, by source, policy, outcome and skip reason: what an Enforce version of the policy would change.",
	}, []string{"source", "policy", "outcome", "reason"})
	policyEvaluationErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_policy_evaluation_errors_total",
		Help: "Evaluation errors of a policy on one interface, by source, policy, mode and failurePolicy: a failurePolicy Ignore policy passed over, " +
			"an Audit policy that failed, an enforced (failurePolicy Fail) policy's PolicyError.",
	}, []string{"source", "policy", "mode", "failure_policy"})
	auditDifferences = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_audit_differences_total",
		Help: "Audit records that decide otherwise than the decision applied (allocation, skip, reason or hotplug), by source and Audit policy: " +
			"where the policy, enforced, would change something.",
	}, []string{"source", "policy"})
	dryRunRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_dryrun_requests_total",
		Help: "Dry-run evaluation requests by HTTP status code (the evaluations handler's answers, and the 429s of its fair queue).",
	}, []string{"code"})
	// DryRunSeatsInUse is the dry-run API server's seats taken: evaluations being read,
	// decoded and answered (at most --dry-run-max-in-flight).
	DryRunSeatsInUse = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vmipam_dryrun_seats_in_use",
		Help: "Dry-run evaluations being answered (seats taken, at most --dry-run-max-in-flight).",
	})
	// DryRunWaiting is the evaluations waiting in the dry-run API server's fair queue for a seat.
	DryRunWaiting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vmipam_dryrun_requests_waiting",
		Help: "Dry-run evaluations waiting in the fair queue for a seat (their bodies not yet read).",
	})
	dryRunRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vmipam_dryrun_rejected_total",
		Help: "Dry-run evaluations the fair queue refused with 429, by reason: queue-full (the caller's own queues were full) or time-out (it waited too long for a seat).",
	}, []string{"reason"})
	// abandonedEvaluations reads the evaluator's own count: Decide stops waiting for an
	// evaluation stuck in a library call past its deadline and a grace (both sources).
	abandonedEvaluations = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "vmipam_policy_evaluations_abandoned_total",
		Help: "Interface evaluations abandoned because a library call could not be interrupted within the deadline and a grace of a quarter of it; each still runs on in the background until the call returns.",
	}, func() float64 { return float64(evaluator.Abandoned()) })
)

// Current is the state the reconcilers of this process last decided, registered with
// controller-runtime's registry. Only the leader reconciles, so only the leader exports
// interface and policy series.
var Current = NewState()

// Records is this process's RecordObservation, registered with controller-runtime's registry.
var Records = NewRecordObservation(nil)

func init() {
	SetBuildInfo("", "")
	// rest_client_rate_limiter_duration_seconds: how long requests waited for the client-side
	// limits (--kube-api-qps, --kube-api-burst), the first thing to read when reconciles are
	// slow but the API server is not (docs/SCALING.md).
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRateLimiterLatency)
	ctrlmetrics.Registry.MustRegister(decisions, evaluationSeconds, compileErrors, auditDecisions, policyEvaluationErrors, auditDifferences,
		dryRunRequests, DryRunSeatsInUse, DryRunWaiting, dryRunRejected, abandonedEvaluations, Current, Records, buildInfo, servingCertificates)
}

// Recorder records metrics under one source label. The zero value is not useful; use
// Controller or DryRun.
type Recorder struct {
	source string
}

// Recorders for the two sources.
var (
	// Controller records for the reconcilers.
	Controller = Recorder{source: SourceController}
	// DryRun records for the dry-run API.
	DryRun = Recorder{source: SourceDryRun}
)

// Decided counts one interface decision.
func (r Recorder) Decided(d evaluator.Decision) {
	decisions.WithLabelValues(r.source, Outcome(d), string(d.Reason)).Inc()
	for _, a := range d.Trace.Audit {
		auditDecisions.WithLabelValues(r.source, a.Policy, auditOutcome(a), string(a.Reason)).Inc()
		if a.Differs {
			auditDifferences.WithLabelValues(r.source, a.Policy).Inc()
		}
	}
	for _, f := range d.Trace.Failures {
		policyEvaluationErrors.WithLabelValues(r.source, f.Policy, string(f.Mode), string(f.FailurePolicy)).Inc()
	}
	if d.Reason == evaluator.ReasonPolicyError && d.Policy != "" && d.Policy != evaluator.BuiltinPolicy {
		policyEvaluationErrors.WithLabelValues(r.source, d.Policy, string(v1alpha1.PolicyModeEnforce), string(v1alpha1.FailurePolicyFail)).Inc()
	}
}

// auditOutcome is Outcome for an Audit-mode policy's would-be decision.
func auditOutcome(a evaluator.AuditRecord) string {
	if a.Error != "" {
		return OutcomeError
	}
	return Outcome(evaluator.Decision{Allocation: a.Allocation, Skip: a.Skip, Reason: a.Reason})
}

// Evaluated observes the duration of one evaluation that started at start.
func (r Recorder) Evaluated(start time.Time) {
	evaluationSeconds.WithLabelValues(r.source).Observe(time.Since(start).Seconds())
}

// CompileFailed counts one policy that did not compile.
func (r Recorder) CompileFailed() {
	compileErrors.WithLabelValues(r.source).Inc()
}

// Request counts one dry-run request answered with the HTTP status code (the evaluations
// handler's answers; the fair queue's 429s are counted by Rejected).
func Request(code int) {
	dryRunRequests.WithLabelValues(strconv.Itoa(code)).Inc()
}

// Reasons the dry run's fair queue refuses an evaluation (the reason label of Rejected), as
// API Priority and Fairness names them.
const (
	RejectedQueueFull = "queue-full"
	RejectedTimeOut   = "time-out"
)

// Rejected counts one evaluation the dry run's fair queue refused with 429, by reason, among
// the answers (code 429) too.
func Rejected(reason string) {
	dryRunRejected.WithLabelValues(reason).Inc()
	Request(http.StatusTooManyRequests)
}

// Outcome is the outcome label of d: Error for a failed evaluation, Skipped for another skip,
// else the allocation.
func Outcome(d evaluator.Decision) string {
	switch {
	case d.Reason == evaluator.ReasonPolicyError:
		return OutcomeError
	case d.Skip:
		return OutcomeSkipped
	case d.Allocation == evaluator.AllocationUnknown:
		return OutcomeError
	}
	return string(d.Allocation)
}
