package scale

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHotplugWorkers compares hotplug latency across --max-concurrent-reconciles values on one
// control plane: VMIPAM_SCALE_N VMs (default 300) converge first, then each value in
// VMIPAM_SCALE_WORKERS_SWEEP (e.g. "4,8,16"; skipped when unset) gets rounds of 100 hotplugs
// at once in a namespace of its own, the values taking turns (twice each, at most 6 rounds),
// so that the load of a shared machine falls on all of them alike. `make bench-workers` runs
// it; docs/SCALING.md reads its figures.
func TestHotplugWorkers(t *testing.T) {
	sweep := os.Getenv("VMIPAM_SCALE_WORKERS_SWEEP")
	if sweep == "" {
		t.Skip("set VMIPAM_SCALE_WORKERS_SWEEP (make bench-workers does) to compare worker counts")
	}
	var values []int
	for _, f := range strings.Split(sweep, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		must(t, err)
		values = append(values, w)
	}
	n := envInt(t, "VMIPAM_SCALE_N", 300)
	ctx := context.Background()
	h := newHarness(t, controllerQPS, controllerBurst)
	h.startStandIns()
	netA, netB := h.networks(ctx)
	h.startController(0)
	h.createVMs(ctx, n, netA, netB)
	h.eventually(time.Duration(n)*time.Second+time.Minute, "convergence", func() bool { return h.ready(ctx, ns) == n })
	h.settle(3*time.Second, 5*time.Minute)
	rounds := min(len(sweepNamespaces), 2*len(values))
	for i := range rounds {
		h.stopController()
		h.workers = values[i%len(values)]
		h.startController(5)
		h.eventually(5*time.Minute, "resync reconciles", func() bool { return h.reconciles() >= float64(n) })
		h.settle(3*time.Second, 5*time.Minute)
		r := h.hotplugIn(ctx, sweepNamespaces[i], 210+i, 100, netA)
		if r.Samples != 100 {
			t.Errorf("round %d: hotplug latency measured on %d VMs, want 100", i, r.Samples)
		}
		t.Logf("%s", fmt.Sprintf("workers %2d: hotplug p50 %4d ms, p99 %4d ms; stages p50 / p99: %s; controller: %s",
			h.workers, r.P50.Milliseconds(), r.P99.Milliseconds(), r.Timeline.summary(), r.Timeline.Window))
	}
}
