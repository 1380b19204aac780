package scale

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

// The suite's own process runs the SDN and virtualization-controller stand-ins and the suite's
// watch of the outcome: at 10,000 VMs it holds ~1 GB of caches (unstructured VMs and KVVMs,
// pods, IPAddresses, records, twice over for the watch), and Go's collector marked it in the
// measured windows. Round 19's profiles: 55 % of the process's CPU in the 3 s after the
// policy's create and 38 % in the hotplug's 3 s was collection, most of it the idle mark
// workers, which run whenever a P of this process is idle and so take the CPU the
// kube-apiserver and etcd wait for on these two cores; a cycle's mark phase spanned 2 s of the
// policy change. On a cluster the real SDN and virtualization controller collect on their own
// nodes' CPUs, so the suite collects its own garbage less often and out of the short windows.
// The controller runs as its own process with Go's defaults: its heap is a measured figure.
const (
	// suiteGCPercent is the suite process's GOGC while a harness lives (Go's default is 100):
	// a collection per 4× the live heap allocated instead of 1×.
	suiteGCPercent = 400
	// suiteMemoryLimit is its soft memory limit meanwhile (runtime/debug.SetMemoryLimit): the
	// collector runs more often again only if the heap nears it — at 10,000 VMs the heap stays
	// under ~3 GiB with suiteGCPercent on a 24 GiB machine.
	suiteMemoryLimit = 8 << 30
)

// tuneOwnGC sets the suite process's collector to suiteGCPercent and suiteMemoryLimit, and
// restores Go's settings when t ends.
func tuneOwnGC(t testing.TB) {
	percent := debug.SetGCPercent(suiteGCPercent)
	limit := debug.SetMemoryLimit(suiteMemoryLimit)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

// collectOwnGarbage runs a full collection of the suite's process and returns when it is
// done, so that a window of a second or two that starts next (a floor, the policy change, the
// hotplug) starts with the stand-ins' collector idle and, with suiteGCPercent, most likely
// ends before the next cycle.
func collectOwnGarbage() { runtime.GC() }

// ownGCMetric is the runtime's estimate of the CPU seconds the process's collector has used:
// mark assists, dedicated and idle mark workers and pauses (runtime/metrics).
const ownGCMetric = "/cpu/classes/gc/total:cpu-seconds"

// ownGCSeconds reads ownGCMetric for the suite's process. The runtime updates it at the end of
// each collection (its docs: an estimate comparable only with other /cpu/classes metrics), so
// a difference over a window counts the cycles that ended within it.
func ownGCSeconds() float64 {
	s := []metrics.Sample{{Name: ownGCMetric}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// gcPercent reads the process's GOGC without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestTuneOwnGCHoldsForTheHarnessAndRestoresGosSettings(t *testing.T) {
	before, limit := gcPercent(), debug.SetMemoryLimit(-1)
	t.Run("harness", func(t *testing.T) {
		tuneOwnGC(t)
		if got := gcPercent(); got != suiteGCPercent {
			t.Errorf("GOGC while the harness lives: %d, want %d", got, suiteGCPercent)
		}
		if got := debug.SetMemoryLimit(-1); got != suiteMemoryLimit {
			t.Errorf("memory limit while the harness lives: %d, want %d", got, int64(suiteMemoryLimit))
		}
	})
	if got := gcPercent(); got != before {
		t.Errorf("GOGC after the harness: %d, want %d restored", got, before)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("memory limit after the harness: %d, want %d restored", got, limit)
	}
}

func TestOwnGCSecondsCountsACollection(t *testing.T) {
	before := ownGCSeconds()
	collectOwnGarbage()
	if after := ownGCSeconds(); after <= before {
		t.Errorf("%s after a full collection: %v, before it %v; want it to grow", ownGCMetric, after, before)
	}
}
