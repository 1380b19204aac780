package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// UnobservedAfter is how long a decision record's spec generation may go unobserved by its
// consumer (status.observedGeneration behind metadata.generation) before
// vmipam_records_unobserved counts it: a virtualization controller applies a record within
// milliseconds, so a minute means none applies it.
const UnobservedAfter = time.Minute

// RecordObservation tracks, per decision record, since when its current spec generation has
// gone unobserved by the consumer, and exposes how many have for longer than UnobservedAfter
// (vmipam_records_unobserved): vmipam running beside a virtualization controller that does not
// apply its decisions (docs/INTEGRATION.md) is visible. It is a prometheus.Collector fed by the
// record informer of every replica. Safe for concurrent use.
type RecordObservation struct {
	mu    sync.Mutex
	now   func() time.Time
	since map[types.NamespacedName]unobserved
}

// unobserved is a record's generation no consumer has observed, and since when.
type unobserved struct {
	generation int64
	since      time.Time
}

// NewRecordObservation returns a RecordObservation telling the time with now (time.Now when
// nil).
func NewRecordObservation(now func() time.Time) *RecordObservation {
	if now == nil {
		now = time.Now
	}
	return &RecordObservation{now: now, since: map[types.NamespacedName]unobserved{}}
}

// Observe records the record key at its metadata.generation and status.observedGeneration.
func (r *RecordObservation) Observe(key types.NamespacedName, generation, observed int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if observed >= generation {
		delete(r.since, key)
		return
	}
	if u, ok := r.since[key]; !ok || u.generation != generation {
		r.since[key] = unobserved{generation: generation, since: r.now()}
	}
}

// Forget drops a record that is gone.
func (r *RecordObservation) Forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.since, key)
}

// Unobserved is how many records have gone unobserved for longer than UnobservedAfter.
func (r *RecordObservation) Unobserved() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, now := 0, r.now()
	for _, u := range r.since {
		if now.Sub(u.since) > UnobservedAfter {
			n++
		}
	}
	return n
}

var recordsUnobservedDesc = prometheus.NewDesc("vmipam_records_unobserved",
	"Decision records (VirtualMachineIPAM) whose current spec generation no virtualization controller has observed for longer than a minute.",
	nil, nil)

// Describe implements prometheus.Collector.
func (r *RecordObservation) Describe(ch chan<- *prometheus.Desc) { ch <- recordsUnobservedDesc }

// Collect implements prometheus.Collector.
func (r *RecordObservation) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(recordsUnobservedDesc, prometheus.GaugeValue, float64(r.Unobserved()))
}

var _ prometheus.Collector = (*RecordObservation)(nil)
