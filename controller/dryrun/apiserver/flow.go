package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	fq "k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing"
	"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/eventclock"
	"k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	fcrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/metrics"
)

// The fair queue of evaluations (fairQueue): its shape is fixed, like a priority level of the
// API server's API Priority and Fairness, with one flow per user.
const (
	// FairQueues is the number of queues evaluations wait in for a seat.
	FairQueues = 64
	// FairHandSize is the number of queues a user's evaluations are dealt (shuffle sharding,
	// by the user's name); each waits in the shortest of them. A user with a backlog fills
	// their hand's queues; another user waits behind that backlog only if both their queues
	// are among them, a chance of one in 2,016 (64 choose 2; for good, as the hand is the
	// name's). Queues take turns, so a user with a backlog in both gets two turns to a lone
	// evaluation's one: another user waits for about two evaluations' times divided by the
	// seats. A larger hand makes the collision rarer and that wait longer.
	FairHandSize = 2
	// FairQueueLength is how many evaluations may wait in one queue while every seat is
	// taken; one more is refused with 429. A user may so have FairHandSize × FairQueueLength
	// (16) evaluations waiting, and all users together FairQueues × FairQueueLength (512),
	// each holding a goroutine and its connection but not its body.
	FairQueueLength = 8
	// MaxRequestBytes bounds the body of a request (413 beyond). Only evaluations holding a
	// seat read theirs, so at most --dry-run-max-in-flight bodies are read and decoded at
	// once (docs/SCALING.md relates that to the chart's memory limit).
	MaxRequestBytes = 3 << 20
	// retryAfterSeconds is the Retry-After of a refused evaluation.
	retryAfterSeconds = 1
)

// fairQueue admits the evaluations (creates of the evaluations resource) to a fixed number of
// seats — --dry-run-max-in-flight, evaluations read, decoded and answered at once — before
// anything reads their body, and shares the seats fairly between the users who ask: the
// queue set of k8s.io/apiserver's API Priority and Fairness (fair queuing with shuffle
// sharding), with one flow per user. Whoever sends many evaluations at once waits in their
// own queues, while another user's evaluation is served within the next few seats freed
// (FairHandSize); what a user
// has waiting beyond their queues, or what waited longer than waitLimit, is refused with
// 429 and Retry-After. Nobody is exempt: cluster admins (system:masters, exempt from the API
// server's own flow control) queue like everyone else, since it is their bodies the seats
// keep out of memory. Other requests (discovery, OpenAPI, health) pass straight through.
type fairQueue struct {
	queues    fq.QueueSet
	seats     int
	waitLimit time.Duration
}

// newFairQueue returns a fair queue of seats seats, in which an evaluation waits for one at
// most waitLimit.
func newFairQueue(seats int, waitLimit time.Duration) (*fairQueue, error) {
	if seats < 1 {
		return nil, fmt.Errorf("dry-run API server: --dry-run-max-in-flight must be at least 1, not %d", seats)
	}
	completer, err := queueset.NewQueueSetFactory(eventclock.Real{}).BeginConstruction(
		fq.QueuingConfig{Name: "vmipam-dryrun", DesiredNumQueues: FairQueues, QueueLengthLimit: FairQueueLength, HandSize: FairHandSize},
		fcmetrics.RatioedGaugePair{RequestsWaiting: gauge{metrics.DryRunWaiting}, RequestsExecuting: gauge{}},
		gauge{metrics.DryRunSeatsInUse}, gauge{})
	if err != nil {
		return nil, fmt.Errorf("dry-run API server: fair queue: %w", err)
	}
	queues := completer.Complete(fq.DispatchingConfig{ConcurrencyLimit: seats, ConcurrencyDenominator: seats})
	return &fairQueue{queues: queues, seats: seats, waitLimit: waitLimit}, nil
}

// handler serves the evaluations of next from the queue: each waits for a seat, is served
// there, or is refused with 429.
func (f *fairQueue) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		if !ok || !info.IsResourceRequest || info.APIGroup != dryrunv1.GroupName || info.Resource != dryrunv1.Resource {
			next.ServeHTTP(w, req)
			return
		}
		caller, ok := genericapirequest.UserFrom(req.Context())
		if !ok {
			caller = &user.DefaultInfo{Name: user.Anonymous}
		}
		flow := caller.GetName()
		waitCtx, cancel := context.WithTimeout(req.Context(), f.waitLimit)
		defer cancel()
		queued, _ := f.queues.StartRequest(waitCtx, &fcrequest.WorkEstimate{InitialSeats: 1}, flowHash(flow), flow, dryrunv1.Resource,
			flow, info.Namespace, nil)
		if queued == nil {
			f.refuse(w, req, metrics.RejectedQueueFull, fmt.Sprintf("the dry run is busy: the queues of your evaluations are full (%d may wait per caller) "+
				"for its %d seats (--dry-run-max-in-flight), which are shared fairly between callers; retry after %ds",
				FairHandSize*FairQueueLength, f.seats, retryAfterSeconds))
			return
		}
		served := false
		queued.Finish(func() {
			served = true
			next.ServeHTTP(w, req)
		})
		if !served && req.Context().Err() == nil {
			f.refuse(w, req, metrics.RejectedTimeOut, fmt.Sprintf("the dry run is busy: this evaluation waited %s for one of its %d seats "+
				"(--dry-run-max-in-flight), which are shared fairly between callers; retry after %ds", f.waitLimit, f.seats, retryAfterSeconds))
		}
	})
}

// refuse answers 429 TooManyRequests with Retry-After and the message, and counts it by
// reason. The body (up to MaxRequestBytes) is read first and discarded through a small
// buffer: a server that answers before the body is sent and closes the connection races
// with the API server still writing it, which then answers the caller 503 ("error trying to
// reach service") instead of the 429.
func (f *fairQueue) refuse(w http.ResponseWriter, req *http.Request, reason, message string) {
	_, _ = io.Copy(io.Discard, io.LimitReader(req.Body, MaxRequestBytes+1))
	metrics.Rejected(reason)
	responsewriters.ErrorNegotiated(apierrors.NewTooManyRequests(message, retryAfterSeconds), Codecs, dryrunv1.SchemeGroupVersion, w, req)
}

// flowHash is the shuffle-sharding hash of a flow, as the API server's flow control hashes
// its flows (the first eight bytes of a SHA-256).
func flowHash(flow string) uint64 {
	sum := sha256.Sum256([]byte("vmipam-dryrun\x00" + flow))
	return binary.LittleEndian.Uint64(sum[:8])
}

// gauge is a Prometheus gauge (or nothing) as the queue set observes its state; the
// denominators of its ratios are not needed.
type gauge struct{ prometheus.Gauge }

var _ fcmetrics.RatioedGauge = gauge{}

// Set sets the gauge.
func (g gauge) Set(v float64) {
	if g.Gauge != nil {
		g.Gauge.Set(v)
	}
}

// Add adds to the gauge.
func (g gauge) Add(v float64) {
	if g.Gauge != nil {
		g.Gauge.Add(v)
	}
}

// Inc adds one.
func (g gauge) Inc() { g.Add(1) }

// Dec subtracts one.
func (g gauge) Dec() { g.Add(-1) }

// SetToCurrentTime is not used by the queue set.
func (g gauge) SetToCurrentTime() {}

// SetDenominator is not needed: the gauges are absolute.
func (g gauge) SetDenominator(float64) {}
