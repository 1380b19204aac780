package soak

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/plan"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// Settings, from the environment (make soak sets them):
//
//	VMIPAM_SOAK_DURATION  how long operations stream (default 60s: the short run of make test)
//	VMIPAM_SOAK_SEED      the stream's seed (default 1); a failure prints it
//	VMIPAM_SOAK_QUIET     operations between quiet points (default 250)
//	VMIPAM_SOAK_REPORT    a Markdown file to append the run's table row to
//	VMIPAM_SOAK_COMMIT    the commit under test, for that row
type settings struct {
	duration time.Duration
	seed     uint64
	quiet    int
	report   string
}

func settingsFromEnv(t *testing.T) settings {
	s := settings{duration: 60 * time.Second, seed: 1, quiet: 250, report: os.Getenv("VMIPAM_SOAK_REPORT")}
	var err error
	if v := os.Getenv("VMIPAM_SOAK_DURATION"); v != "" {
		if s.duration, err = time.ParseDuration(v); err != nil {
			t.Fatalf("VMIPAM_SOAK_DURATION: %v", err)
		}
	}
	if v := os.Getenv("VMIPAM_SOAK_SEED"); v != "" {
		if s.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("VMIPAM_SOAK_SEED: %v", err)
		}
	}
	if v := os.Getenv("VMIPAM_SOAK_QUIET"); v != "" {
		if s.quiet, err = strconv.Atoi(v); err != nil {
			t.Fatalf("VMIPAM_SOAK_QUIET: %v", err)
		}
	}
	return s
}

// convergeBound is how long the world may take to settle after the stream pauses: a lease
// takeover after a kill (15 s), SDN's first answers (UnansweredGrace, 30 s, while SDN is quiet; the
// soak's VMs are too few for the longer wait of a backlog, BacklogGrace), and margin.
const convergeBound = 2 * time.Minute

// results are the soak's figures.
type results struct {
	mu                                  sync.Mutex
	ops, kills, restarts, storms, quiet int
	checks                              int
	violations                          []string
}

func (r *results) violate(at string, vs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range vs {
		r.violations = append(r.violations, at+": "+v)
	}
}

func (r *results) checked() {
	r.mu.Lock()
	r.checks++
	r.mu.Unlock()
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak does not run with -short")
	}
	st := settingsFromEnv(t)
	t.Logf("soak: seed %d, %v of operations, a quiet point every %d", st.seed, st.duration, st.quiet)
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	dir, err := os.MkdirTemp("", "vmipam-soak-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { // the controllers' logs stay for a failed run
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	}()
	e, err := env.Start(env.Options{ControllerManager: true, Dir: dir})
	if e != nil {
		defer func() { _ = e.Stop() }()
	}
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startStandIns(t, ctx, e, scheme)

	w := &world{c: admin, rng: rand.New(rand.NewPCG(st.seed, 0x50a4)), decoys: map[string]string{}}
	if err := w.setup(ctx); err != nil {
		t.Fatal(err)
	}
	proxy, err := newFaultProxy(e.Config, st.seed)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.close()
	rs := &replicaSet{bin: buildController(t, e.Dir), dir: e.Dir}
	rs.kubeconfig = proxyKubeconfig(t, e.Dir, proxy.URL())
	if err := rs.startAll(); err != nil {
		t.Fatal(err)
	}
	defer rs.stopAll()

	res := &results{}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d; replay with VMIPAM_SOAK_SEED=%d; operation log:\n%s\ncontroller logs in %s",
				st.seed, st.seed, strings.Join(w.log, "\n"), e.Dir)
		}
	}()
	run(t, ctx, st, w, proxy, rs, res)
	report(t, st, proxy, rs, res)
}

// zapLevel quiets the stand-ins' logs to errors unless VMIPAM_SOAK_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("VMIPAM_SOAK_VERBOSE") != "" {
		return zapcore.InfoLevel
	}
	return zapcore.ErrorLevel
}

// startStandIns runs the SDN and virtualization-controller stand-ins in process, straight to
// the API server; the latter applies vmipam's records and writes the VM status, as the real one
// does beside vmipam.
func startStandIns(t *testing.T, ctx context.Context, e *env.Environment, scheme *runtime.Scheme) {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	runtime := virtualization.New(nil)
	runtime.ReportGuest = true
	runtime.ExpectationTTL = 2 * time.Second
	if err := sdn.New(nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := runtime.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
}

// run streams operations and faults until the duration is over, with quiet points, then
// checks the final convergence and that a full resync writes nothing.
func run(t *testing.T, ctx context.Context, st settings, w *world, proxy *faultProxy, rs *replicaSet, res *results) {
	faults := rand.New(rand.NewPCG(st.seed, 0xfa17))
	proxy.set(true, calm)
	stop := watchContinuously(ctx, w, res)
	defer stop()
	deadline := time.Now().Add(st.duration)
	for time.Now().Before(deadline) {
		w.step(ctx)
		res.ops++
		if res.ops%st.quiet == 0 {
			quietPoint(t, ctx, w, proxy, res, fmt.Sprintf("quiet point %d", res.quiet+1))
			proxy.set(true, calm)
		}
		inject(t, faults, w, proxy, rs, res)
		time.Sleep(time.Duration(20+faults.IntN(120)) * time.Millisecond)
	}
	stop()
	quietPoint(t, ctx, w, proxy, res, "end of the stream")
	resync(t, ctx, w, proxy, rs, res)
}

// Chances, per operation, of each fault beside the proxy's: at about ten operations a second,
// a kill -9 of the leader and a restart of either replica about once a minute each (a lease
// takeover takes up to 15 s, so more would leave the world without a controller most of the
// time), and an API storm about every 20 s.
const (
	perMilleKill    = 2
	perMilleRestart = 2
	perMilleStorm   = 5
)

// inject maybe injects a fault.
func inject(t *testing.T, rng *rand.Rand, w *world, proxy *faultProxy, rs *replicaSet, res *results) {
	switch n := rng.IntN(1000); {
	case n < perMilleKill: // kill -9 the leader
		if i := rs.leader(); i >= 0 {
			w.record("fault: kill -9 replica %d (the leader)", i)
			if err := rs.bounce(i, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			res.kills++
		}
	case n < perMilleKill+perMilleRestart: // restart either replica
		i := rng.IntN(replicaCount)
		w.record("fault: restart replica %d", i)
		if err := rs.bounce(i, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		res.restarts++
	case n < perMilleKill+perMilleRestart+perMilleStorm: // API errors and dropped watches for a few seconds
		w.record("fault: API storm")
		proxy.set(true, storm)
		res.storms++
		time.AfterFunc(time.Duration(2+rng.IntN(4))*time.Second, func() { proxy.set(true, calm) })
	}
}

// watchContinuously checks the cheap invariant (no address lost under a live guest) twice a
// second until stopped. A violation is confirmed by a second look, because three Lists are not
// one moment: a VM deleted between them may look alive while its addresses are collected.
func watchContinuously(ctx context.Context, w *world, res *results) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
			s, err := observe(ctx, w.c)
			if err != nil {
				continue
			}
			res.checked()
			if lost := s.lostAddresses(); len(lost) > 0 {
				if again, err := observe(ctx, w.c); err == nil {
					res.violate(fmt.Sprintf("continuous check after operation %d", len(w.log)), intersect(lost, again.lostAddresses()))
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// quietFor is how long the controllers must not write for the world to count as converged: a
// release under way (an unwanted Auto IPAddress waiting out plan.ReleaseGrace) writes its
// delete up to that long after the last other write.
const quietFor = plan.ReleaseGrace + 3*time.Second

// quietPoint pauses the stream and the faults, waits until the world converges (every check
// passes and the controllers stopped writing for quietFor), and records what still fails after
// the bound.
func quietPoint(t *testing.T, ctx context.Context, w *world, proxy *faultProxy, res *results, at string) {
	proxy.set(false, calm)
	res.quiet++
	start := time.Now()
	var last []string
	lastWrites, stableSince := proxy.writes.Load(), time.Now()
	for time.Since(start) < convergeBound {
		time.Sleep(time.Second)
		s, err := observe(ctx, w.c)
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		w.mu.Lock()
		decoys := maps.Clone(w.decoys)
		w.mu.Unlock()
		last = slices.Concat(s.lostAddresses(), s.sharedAddresses(), s.autoIPAddresses(decoys), s.staticsUntouched(), s.statusAgrees())
		res.checked()
		if n := proxy.writes.Load(); n != lastWrites {
			lastWrites, stableSince = n, time.Now()
		}
		if len(last) == 0 && time.Since(stableSince) > quietFor {
			w.record("%s: converged in %v", at, time.Since(start).Round(time.Second))
			return
		}
	}
	w.record("%s: not converged within %v", at, convergeBound)
	res.violate(at+" (not converged within "+convergeBound.String()+")", last)
}

// resync restarts both replicas, which then reconcile every VM from a fresh cache, and
// counts their writes (leases aside): a converged world needs none.
func resync(t *testing.T, ctx context.Context, w *world, proxy *faultProxy, rs *replicaSet, res *results) {
	proxy.set(false, calm)
	before := proxy.writes.Load()
	for i := range replicaCount {
		if err := rs.bounce(i, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(convergeBound)
	for rs.leader() < 0 && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	time.Sleep(20 * time.Second) // the new leader reconciles every VM
	if n := proxy.writes.Load() - before; n != 0 {
		last, _ := proxy.lastPath.Load().(string)
		res.violate("full resync", []string{fmt.Sprintf("a full resync of a converged world wrote %d times (last: %s)", n, last)})
	}
	res.checked()
	w.record("full resync: %d writes", proxy.writes.Load()-before)
}

// report logs the figures, appends them to the report file when asked, and fails on any
// violation.
func report(t *testing.T, st settings, proxy *faultProxy, rs *replicaSet, res *results) {
	rs.mu.Lock()
	exits := rs.exits
	rs.mu.Unlock()
	faults := int(proxy.injected.Load()) + res.kills + res.restarts + exits
	row := fmt.Sprintf("| %s | %s | %d | %v | %d | %d (proxy %d, kill -9 of the leader %d, restarts %d, lost leases %d, storms %d) | %d | %d | %d |",
		time.Now().UTC().Format("2006-01-02"), os.Getenv("VMIPAM_SOAK_COMMIT"), st.seed, st.duration, res.ops, faults, proxy.injected.Load(), res.kills,
		res.restarts, exits, res.storms, res.quiet, res.checks, len(res.violations))
	t.Logf("soak figures: seed %d, %d operations, %d faults, %d quiet points, %d invariant checks, %d violations\n%s",
		st.seed, res.ops, faults, res.quiet, res.checks, len(res.violations), row)
	if st.report != "" {
		f, err := os.OpenFile(st.report, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Errorf("report: %v", err)
		} else {
			_, _ = fmt.Fprintln(f, row)
			_ = f.Close()
		}
	}
	for _, v := range res.violations {
		t.Errorf("violation: %s", v)
	}
}
