package apiserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// held is a handler that reads an evaluation's body, says whose it is on started and holds
// the seat until released.
type held struct {
	started chan string
	release chan struct{}
}

func newHeld() *held { return &held{started: make(chan string, 100), release: make(chan struct{})} }

func (h *held) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.started <- string(body)
	<-h.release
	w.WriteHeader(http.StatusCreated)
}

// next is the name of the next evaluation served (its body), failing after a while.
func (h *held) next(t *testing.T) string {
	t.Helper()
	select {
	case name := <-h.started:
		return name
	case <-time.After(10 * time.Second):
		t.Fatal("no evaluation was served")
		return ""
	}
}

// watchedBody is a request body that records whether anyone read it.
type watchedBody struct {
	io.Reader
	read *atomic.Bool
}

func (b watchedBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.Reader.Read(p)
}

func (b watchedBody) Close() error { return nil }

// evaluationRequest is a create of an Evaluation by the user (with the groups), as the
// handler chain hands it on after authentication and authorization; its body is name.
func evaluationRequest(name, userName string, groups ...string) (*http.Request, *atomic.Bool) {
	read := &atomic.Bool{}
	r := httptest.NewRequest(http.MethodPost, "/apis/"+dryrunv1.SchemeGroupVersion.String()+"/namespaces/team/evaluations", nil)
	r.Body = watchedBody{Reader: strings.NewReader(name), read: read}
	ctx := genericapirequest.WithRequestInfo(r.Context(), &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: "create",
		APIPrefix: "apis", APIGroup: dryrunv1.GroupName, APIVersion: dryrunv1.SchemeGroupVersion.Version, Namespace: "team",
		Resource: dryrunv1.Resource})
	ctx = genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: userName, Groups: groups})
	return r.WithContext(ctx), read
}

// serving runs requests through h, each in its own goroutine, and collects the answers.
type serving struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	answers map[string]*httptest.ResponseRecorder
}

func (s *serving) serve(h http.Handler, name string, r *http.Request) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.answers == nil {
			s.answers = map[string]*httptest.ResponseRecorder{}
		}
		s.answers[name] = w
	}()
}

func (s *serving) answer(name string) *httptest.ResponseRecorder {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers[name]
}

// waitFor waits until the queue holds waiting evaluations.
func waitFor(t *testing.T, f *fairQueue, waiting int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.queues.Dump(false).Waiting != waiting {
		if time.Now().After(deadline) {
			t.Fatalf("%d evaluations wait, want %d", f.queues.Dump(false).Waiting, waiting)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestFairQueueServesAnotherCallerAtItsTurnNotAfterTheBacklog(t *testing.T) {
	f, err := newFairQueue(1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inner := newHeld()
	h, s := f.handler(inner), &serving{}
	defer s.wg.Wait()
	defer close(inner.release)
	first, _ := evaluationRequest("busy-0", "busy")
	s.serve(h, "busy-0", first)
	if got := inner.next(t); got != "busy-0" {
		t.Fatalf("served %q first", got)
	}
	const backlog = FairHandSize * FairQueueLength
	for i := 1; i <= backlog; i++ {
		r, _ := evaluationRequest(fmt.Sprintf("busy-%d", i), "busy")
		s.serve(h, fmt.Sprintf("busy-%d", i), r)
		waitFor(t, f, i)
	}
	probe, probeRead := evaluationRequest("probe", "probe")
	s.serve(h, "probe", probe)
	waitFor(t, f, backlog+1)
	if probeRead.Load() {
		t.Fatal("the waiting probe's body was read")
	}
	for turn := 1; ; turn++ {
		// Fair queuing shares the seats' time: each evaluation takes some.
		time.Sleep(20 * time.Millisecond)
		inner.release <- struct{}{}
		if got := inner.next(t); got == "probe" {
			t.Logf("the probe was served at turn %d of the busy caller's %d", turn, backlog)
			if turn > FairHandSize+1 {
				t.Errorf("the probe was served at turn %d, want within %d: its own queue, not after the busy caller's %d", turn, FairHandSize+1, backlog)
			}
			return
		}
		if turn > backlog {
			t.Fatal("the probe was never served")
		}
	}
}

func TestFairQueueReadsNoBodyBeforeItsSeatNotEvenAClusterAdmins(t *testing.T) {
	f, err := newFairQueue(2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inner := newHeld()
	h, s := f.handler(inner), &serving{}
	defer s.wg.Wait()
	defer close(inner.release)
	read := map[string]*atomic.Bool{}
	for i := range 6 {
		name := fmt.Sprintf("admin-%d", i)
		r, bodyRead := evaluationRequest(name, "admin", user.SystemPrivilegedGroup, user.AllAuthenticated)
		read[name] = bodyRead
		s.serve(h, name, r)
	}
	serving := map[string]bool{inner.next(t): true, inner.next(t): true}
	waitFor(t, f, 4)
	if n := f.queues.Dump(false).Executing; n != 2 {
		t.Errorf("%d evaluations are served at once, want the 2 seats", n)
	}
	if seats, waiting := metricValue(t, "vmipam_dryrun_seats_in_use", "", ""), metricValue(t, "vmipam_dryrun_requests_waiting", "", ""); seats != 2 || waiting != 4 {
		t.Errorf("the metrics show %v seats in use and %v waiting, want 2 and 4", seats, waiting)
	}
	for name, bodyRead := range read {
		if bodyRead.Load() != serving[name] {
			t.Errorf("%s's body read: %v, being served: %v: only a seat reads a body", name, bodyRead.Load(), serving[name])
		}
	}
}

func TestFairQueueRefusesWhatCannotWaitWith429AndRetryAfter(t *testing.T) {
	f, err := newFairQueue(1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inner := newHeld()
	h, s := f.handler(inner), &serving{}
	defer s.wg.Wait()
	defer close(inner.release)
	first, _ := evaluationRequest("busy-0", "busy")
	s.serve(h, "busy-0", first)
	inner.next(t)
	const backlog = FairHandSize * FairQueueLength
	for i := 1; i <= backlog; i++ {
		r, _ := evaluationRequest(fmt.Sprintf("busy-%d", i), "busy")
		s.serve(h, fmt.Sprintf("busy-%d", i), r)
		waitFor(t, f, i)
	}
	one, read := evaluationRequest("one-too-many", "busy")
	w := httptest.NewRecorder()
	before := metricValue(t, "vmipam_dryrun_rejected_total", "reason", "queue-full")
	h.ServeHTTP(w, one)
	if n := metricValue(t, "vmipam_dryrun_rejected_total", "reason", "queue-full") - before; n != 1 {
		t.Errorf("%v refusals counted as queue-full, want 1", n)
	}
	expectTooManyRequests(t, w, "the queues of your evaluations are full (16 may wait per caller) for its 1 seats (--dry-run-max-in-flight)")
	started := read.Load()
	if n, _ := one.Body.Read(make([]byte, 1)); !started || n != 0 {
		t.Error("the refused evaluation's body was not drained: the API server, still writing it, would answer 503")
	}
}

func TestFairQueueRefusesAnEvaluationThatWaitedPastTheLimit(t *testing.T) {
	f, err := newFairQueue(1, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	inner := newHeld()
	h, s := f.handler(inner), &serving{}
	defer s.wg.Wait()
	defer close(inner.release)
	first, _ := evaluationRequest("busy-0", "busy")
	s.serve(h, "busy-0", first)
	inner.next(t)
	waiting, _ := evaluationRequest("patient", "patient")
	w := httptest.NewRecorder()
	before := metricValue(t, "vmipam_dryrun_rejected_total", "reason", "time-out")
	start := time.Now()
	h.ServeHTTP(w, waiting)
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("refused after %s, before the wait limit", waited)
	}
	if n := metricValue(t, "vmipam_dryrun_rejected_total", "reason", "time-out") - before; n != 1 {
		t.Errorf("%v refusals counted as time-out, want 1", n)
	}
	expectTooManyRequests(t, w, "this evaluation waited 100ms for one of its 1 seats (--dry-run-max-in-flight)")
}

func TestFairQueueLetsOtherRequestsThrough(t *testing.T) {
	f, err := newFairQueue(1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	inner := newHeld()
	h, s := f.handler(inner), &serving{}
	defer s.wg.Wait()
	defer close(inner.release)
	first, _ := evaluationRequest("busy-0", "busy")
	s.serve(h, "busy-0", first)
	inner.next(t)
	discovery := httptest.NewRequest(http.MethodGet, "/apis/"+dryrunv1.SchemeGroupVersion.String(), nil)
	discovery = discovery.WithContext(genericapirequest.WithRequestInfo(discovery.Context(),
		&genericapirequest.RequestInfo{Path: discovery.URL.Path, Verb: "get"}))
	s.serve(h, "discovery", discovery)
	if got := inner.next(t); got != "" {
		t.Errorf("served %q, want the discovery request (no body) while the seat is taken", got)
	}
}

func TestFairQueueNeedsASeat(t *testing.T) {
	if _, err := newFairQueue(0, time.Minute); err == nil || !strings.Contains(err.Error(), "--dry-run-max-in-flight must be at least 1") {
		t.Errorf("err = %v", err)
	}
}

// metricValue is the value of the metric name (a counter or gauge; of the series with the
// label value, when label is not empty) in the manager's registry.
func metricValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// expectTooManyRequests checks a 429 answer: a Status of reason TooManyRequests with the
// message and a Retry-After.
func expectTooManyRequests(t *testing.T, w *httptest.ResponseRecorder, message string) {
	t.Helper()
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("answer %d with Retry-After %q, want 429 with 1", w.Code, w.Header().Get("Retry-After"))
	}
	st := &metav1.Status{}
	if err := json.Unmarshal(w.Body.Bytes(), st); err != nil {
		t.Fatalf("the answer is not a Status: %v: %s", err, w.Body)
	}
	if st.Reason != metav1.StatusReasonTooManyRequests || !strings.Contains(st.Message, message) ||
		st.Details == nil || st.Details.RetryAfterSeconds != 1 {
		t.Errorf("status = %+v, want TooManyRequests saying %q", st, message)
	}
}
