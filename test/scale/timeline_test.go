package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vmctrl "github.com/vmipam/vmipam/controller/vm"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// The stages of one hotplug, in order: each is the time from the previous mark to its own.
// Marks come from the API server's audit log (its own clock, µs) and the controller's log
// (the same machine's clock, ms), so a stage is exact to about a millisecond.
const (
	// stageDelivery: SDN's status write of the IPAddress answered → the controller's handler
	// ran and enqueued the VM (seen and enqueued are one instant: the handler runs as the
	// informer delivers the event).
	stageDelivery = "watch delivery"
	// stageQueue: enqueued → the reconcile of the VM started (waiting behind other VMs).
	stageQueue = "queue wait"
	// stageDecide: reconcile start → the API server received the VM's record patch (observe,
	// decide, the client's rate limiter).
	stageDecide = "reconcile → record patch"
	// stagePod: the record patch received → the virtualization controller's (the stand-in's)
	// patch of the pod's networks-spec answered: its watch, queue and reconcile.
	stagePod = "record patch → pod patch done"
	// stageObserve: the pod patch answered → the suite's watch saw it.
	stageObserve = "→ observed"
)

var stages = []string{stageDelivery, stageQueue, stageDecide, stagePod, stageObserve}

// timeline is the stage breakdown of the hotplugs of one run: per stage, the durations of every
// hotplug with all its marks.
type timeline struct {
	Stages map[string][]time.Duration
	// Reconciles are the reconciles of the hot-plugged VMs between the first IPAddress
	// created and the last pod patched; Throttled the controller's client-side throttling
	// waits logged meanwhile.
	Reconciles, Throttled int
	// Window is what the controller's metrics say of the whole hotplug, every VM included.
	Window controllerWindow
	// Writes are the controller's write requests during the hotplug by verb and resource.
	Writes map[string]int
}

// controllerWindow is the difference of the controller's metrics between two scrapes: its VM
// reconciles, their total wall time, and the seconds its requests waited for the client-side
// rate limiter.
type controllerWindow struct {
	Reconciles                           uint64
	ReconcileSeconds, RateLimiterSeconds float64
}

// controllerWindowAt scrapes the controller's cumulative figures; subtract two.
func (h *harness) controllerWindowAt() controllerWindow {
	m, err := h.scrape()
	must(h.t, err)
	var w controllerWindow
	w.ReconcileSeconds, w.Reconciles = histogram(m, "controller_runtime_reconcile_time_seconds", "controller", "virtualmachine")
	w.RateLimiterSeconds, _ = histogram(m, "rest_client_rate_limiter_duration_seconds", "", "")
	return w
}

func (w controllerWindow) minus(o controllerWindow) controllerWindow {
	return controllerWindow{Reconciles: w.Reconciles - o.Reconciles, ReconcileSeconds: w.ReconcileSeconds - o.ReconcileSeconds,
		RateLimiterSeconds: w.RateLimiterSeconds - o.RateLimiterSeconds}
}

// String is the window for the test log.
func (w controllerWindow) String() string {
	mean := 0.0
	if w.Reconciles > 0 {
		mean = w.ReconcileSeconds / float64(w.Reconciles) * 1000
	}
	return fmt.Sprintf("%d VM reconciles in all, %.0f ms each on average, %.2f s waited on the client-side rate limiter in all",
		w.Reconciles, mean, w.RateLimiterSeconds)
}

// summary is one line per stage: p50 / p99 over the hotplugs.
func (tl timeline) summary() string {
	var parts []string
	for _, s := range stages {
		d := tl.Stages[s]
		if len(d) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s / %s", s, ms(percentile(d, 50)), ms(percentile(d, 99))))
	}
	return strings.Join(parts, "; ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// percentile is the p-th percentile of d (nearest rank); d need not be sorted.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// hotplugMarks are the marks of one hotplug: ip is the IPAddress, vm and pod its VM and
// launcher pod.
type hotplugMarks struct {
	ip, vm, pod                             string
	answered, enqueued, started             time.Time
	recordPatched, podPatched, observedTime time.Time
	// recordPatches and podPatches are every patch of the VM's record and of its pod after the
	// mark: the stages take the first after the mark before them (a VM whose record was
	// patched before SDN answered, for the skip, must not pair the hotplug with that patch).
	recordPatches, podPatches []time.Time
}

// firstAfter is the first of ts not before t, or zero.
func firstAfter(ts []time.Time, t time.Time) time.Time {
	for _, v := range ts {
		if !v.Before(t) {
			return v
		}
	}
	return time.Time{}
}

// controllerLogLine is the part of a controller log line the timeline reads.
type controllerLogLine struct {
	TS        string `json:"ts"`
	Msg       string `json:"msg"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	IPAddress struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"ipaddress"`
}

// zapISO8601 is the layout of zapcore.ISO8601TimeEncoder, the controller's time format.
const zapISO8601 = "2006-01-02T15:04:05.000Z0700"

// controllerLogFrom reads the controller's log lines from offset.
func (h *harness) controllerLogFrom(offset int64) []controllerLogLine {
	f := h.openAt(h.controllerLog(), offset)
	if f == nil {
		return nil
	}
	defer f.Close()
	var out []controllerLogLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l controllerLogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// fileSize is the size of the file at path, an offset to read from later.
func (h *harness) fileSize(path string) int64 {
	fi, err := os.Stat(path)
	must(h.t, err)
	return fi.Size()
}

// hotplugTimeline builds the timeline of the hotplugs in namespace hns that marks holds (ip, vm, pod and observed
// set), from the audit log after auditMark and the controller's log after logOffset. A
// hotplug missing a mark is left out of the stages after it.
func (h *harness) hotplugTimeline(hns string, marks []*hotplugMarks, auditMark, logOffset int64) timeline {
	byIP, byVM, byPod := map[string]*hotplugMarks{}, map[string]*hotplugMarks{}, map[string]*hotplugMarks{}
	for _, m := range marks {
		byIP[m.ip], byVM[m.vm], byPod[m.pod] = m, m, m
	}
	var last time.Time
	for _, e := range h.auditEntries(auditMark) {
		if e.ObjectRef.Namespace != hns || !e.ok() || e.Verb != "patch" {
			continue
		}
		switch {
		case e.User.Username == standInUser && e.resource() == "ipaddresses/status" && byIP[e.ObjectRef.Name] != nil:
			setFirst(&byIP[e.ObjectRef.Name].answered, e.Done)
		case e.User.Username == controllerUser && e.resource() == "virtualmachineipams" && byVM[e.ObjectRef.Name] != nil:
			m := byVM[e.ObjectRef.Name]
			m.recordPatches = append(m.recordPatches, e.Received)
		case e.User.Username == standInUser && e.resource() == "pods" && byPod[e.ObjectRef.Name] != nil:
			m := byPod[e.ObjectRef.Name]
			m.podPatches = append(m.podPatches, e.Done)
			last = maxTime(last, e.Done)
		}
	}
	tl := timeline{Stages: map[string][]time.Duration{}}
	for _, l := range h.controllerLogFrom(logOffset) {
		ts, err := time.Parse(zapISO8601, l.TS)
		if err != nil {
			continue
		}
		switch {
		case l.Msg == vmctrl.AnsweredLog && l.IPAddress.Namespace == hns && byIP[l.IPAddress.Name] != nil:
			setFirst(&byIP[l.IPAddress.Name].enqueued, ts)
		case l.Msg == "Reconciling" && l.Namespace == hns && byVM[l.Name] != nil:
			if m := byVM[l.Name]; !m.enqueued.IsZero() && !ts.Before(m.enqueued) {
				setFirst(&m.started, ts)
			}
			if last.IsZero() || !ts.After(last) {
				tl.Reconciles++
			}
		case strings.Contains(l.Msg, "client-side throttling"):
			tl.Throttled++
		}
	}
	for _, m := range marks {
		if !m.started.IsZero() {
			m.recordPatched = firstAfter(m.recordPatches, m.started)
		}
		if !m.recordPatched.IsZero() {
			m.podPatched = firstAfter(m.podPatches, m.recordPatched)
		}
		chain := []time.Time{m.answered, m.enqueued, m.started, m.recordPatched, m.podPatched, m.observedTime}
		for i, s := range stages {
			if chain[i].IsZero() || chain[i+1].IsZero() {
				break
			}
			tl.Stages[s] = append(tl.Stages[s], max(0, chain[i+1].Sub(chain[i])))
		}
	}
	return tl
}

func setFirst(t *time.Time, v time.Time) {
	if t.IsZero() {
		*t = v
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// launcherPods maps the namespace's VMs to their launcher pods.
func (h *harness) launcherPods(ctx context.Context, namespace string) map[string]string {
	var pods corev1.PodList
	must(h.t, h.view.List(ctx, &pods, client.InNamespace(namespace), client.UnsafeDisableDeepCopy))
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Labels[vmv1.LabelLauncherVMName]] = p.Name
	}
	return out
}
