package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// Users that tell the clients apart in the audit log.
const (
	controllerUser = "vmipam-controller"
	floorUser      = "vmipam-floor"
	benchUser      = "vmipam-bench"
	standInUser    = "vmipam-standins"
)

// auditPolicy logs the metadata of every write of the measured clients and the stand-ins,
// nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + controllerUser + `", "` + floorUser + `", "` + standInUser + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// harness is one control plane with the stand-ins and, when started, the controller process.
type harness struct {
	t   testing.TB
	env *env.Environment
	dir string
	// benchCfg is the bench user's config (one client certificate for the whole harness);
	// bench, view and apiHTTP are built from it.
	benchCfg *rest.Config
	bench    client.Client
	apiHTTP  *http.Client
	// view is what the suite watches the outcome through: an informer cache of the measured
	// namespaces. Polling full LISTs of 10,000 VMs, 20,000 IPAddresses and 10,000 pods several
	// times a second would load the API server more than the controller does.
	view  client.Reader
	audit string

	controller  *exec.Cmd
	metricsAddr string
	pprofAddr   string
	qps, burst  int
	// workers is the controller's --max-concurrent-reconciles at its next start.
	workers int
	// apiServerPID and etcdPID are the control plane's processes, found at the first
	// cpuBudget.
	apiServerPID, etcdPID int
	// stopStand stops the stand-ins, stopView the view's informers.
	stopStand, stopView context.CancelFunc
}

func newHarness(t testing.TB, qps, burst int) *harness {
	dir := t.TempDir()
	logs, lerr := os.Create(filepath.Join(dir, "standins.log"))
	must(t, lerr)
	ctrl.SetLogger(zap.New(zap.WriteTo(logs)))
	h := &harness{t: t, dir: dir, audit: filepath.Join(dir, "audit.log"), qps: qps, burst: burst, workers: workers}
	policy := filepath.Join(dir, "audit-policy.yaml")
	must(t, os.WriteFile(policy, []byte(auditPolicy), 0o600))
	tuneOwnGC(t)
	e, err := env.Start(env.Options{Dir: dir, APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": h.audit, "audit-log-mode": "blocking",
		"audit-log-maxsize": "0", "max-requests-inflight": "1000", "max-mutating-requests-inflight": "500",
		// DetectCacheInconsistency (beta, on since Kubernetes 1.34) has the kube-apiserver list
		// each resource from etcd and digest it against its watch cache every 5–7.5 min. At
		// 10,000 VMs one check took 1.16 s of the 3.27 s of kube-apiserver CPU in a 3 s policy
		// change (round 19's profile): on these two cores a check landing in a window of a
		// second or two measures the check, at random, not the writers. It is vmipam's cost no
		// more than the floor's, so the suite turns it off for both.
		"feature-gates": "DetectCacheInconsistency=false",
	}})
	h.env = e
	t.Cleanup(h.keepFiles) // runs after h.stop: the logs are complete
	t.Cleanup(h.stop)
	must(t, err)
	_, h.benchCfg, err = e.AdminUser(benchUser)
	must(t, err)
	h.benchCfg.QPS, h.benchCfg.Burst = 2000, 4000
	scheme, err := controller.NewScheme()
	must(t, err)
	h.bench, err = client.New(h.benchCfg, client.Options{Scheme: scheme})
	must(t, err)
	h.apiHTTP, err = rest.HTTPClientFor(h.benchCfg)
	must(t, err)
	h.checkNoConsistencyChecks()
	h.view = h.startView(scheme)
	return h
}

// Namespaces of the measured objects: the convergence run and the hotplug run. The floor's
// namespace is left out of the view, so watching does not load its measurement.
const (
	ns  = "scale"
	hns = "hotplug"
)

// sweepNamespaces are the namespaces of TestHotplugWorkers' rounds, one per round.
var sweepNamespaces = []string{"sweep-0", "sweep-1", "sweep-2", "sweep-3", "sweep-4", "sweep-5"}

// startView starts the watch-based view of the measured namespaces (VMs, IPAddresses, pods)
// and waits for it to sync. Reads from it are in memory; call them with UnsafeDisableDeepCopy.
// It keeps no managedFields, which no check reads: less for the suite's process to hold and
// its collector to mark (owngc_test.go), and for every Get of a 10 ms poll to copy.
func (h *harness) startView(scheme *runtime.Scheme) client.Reader {
	watched := map[string]cache.Config{ns: {}, hns: {}}
	for _, n := range sweepNamespaces {
		watched[n] = cache.Config{}
	}
	c, err := cache.New(h.benchCfg, cache.Options{Scheme: scheme, DefaultNamespaces: watched,
		DefaultTransform: cache.TransformStripManagedFields()})
	must(h.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h.stopView = cancel
	for _, obj := range []client.Object{&vmv1.VirtualMachine{}, &sdnv1.IPAddress{}, &corev1.Pod{}} {
		_, err := c.GetInformer(ctx, obj)
		must(h.t, err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		h.t.Fatal("the bench view did not sync")
	}
	return c
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// client returns a client of a new admin user with the given rate limits.
func (h *harness) client(user string, qps float32, burst int) client.Client {
	_, cfg, err := h.env.AdminUser(user)
	must(h.t, err)
	cfg.QPS, cfg.Burst = qps, burst
	scheme, err := controller.NewScheme()
	must(h.t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(h.t, err)
	return c
}

// stop stops the controller, the stand-ins, the view and the control plane; stopping again does
// nothing.
// run stops its harness when it is done (TestScale's runs would otherwise keep every earlier
// run's control plane, controller and stand-ins running beside the next run until the test
// ends: rounds up to 19 measured runs 2 and 3 of `make bench` so), and t's cleanup stops it
// when a run fails half-way.
func (h *harness) stop() {
	h.stopController()
	for _, stop := range []*context.CancelFunc{&h.stopStand, &h.stopView} {
		if *stop != nil {
			(*stop)()
			*stop = nil
		}
	}
	if h.env != nil {
		_ = h.env.Stop()
		h.env = nil
	}
}

// startStandIns runs the SDN and virtualization-controller stand-ins in this process.
func (h *harness) startStandIns() {
	_, cfg, err := h.env.AdminUser(standInUser)
	must(h.t, err)
	cfg.QPS, cfg.Burst = standInQPS, standInBurst
	scheme, err := controller.NewScheme()
	must(h.t, err)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr(true)}})
	must(h.t, err)
	must(h.t, sdn.New(nil).SetupWithManager(mgr))
	must(h.t, virtualization.New(nil).SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	h.stopStand = cancel
	go func() { _ = mgr.Start(ctx) }()
}

func ptr[T any](v T) *T { return &v }

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// controllerBinary builds cmd/ipam-controller once per test process.
func controllerBinary(t testing.TB) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vmipam-scale-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "ipam-controller")
		out, err := exec.Command("go", "build", "-o", binary, "github.com/vmipam/vmipam/cmd/ipam-controller").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	must(t, buildErr)
	return binary
}

// startController runs the controller binary as its own user, logging at logLevel (zap's:
// 0 info, 5 adds a line per reconcile and per IPAddress answer, which the hotplug timeline
// reads) to controller.log in the harness directory.
func (h *harness) startController(logLevel int) {
	kubeconfig, _, err := h.env.AdminUser(controllerUser)
	must(h.t, err)
	h.metricsAddr, h.pprofAddr = freeAddr(h.t), freeAddr(h.t)
	log, err := os.OpenFile(h.controllerLog(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(h.t, err)
	cmd := exec.Command(controllerBinary(h.t), "--kubeconfig="+kubeconfig, "--leader-elect=false",
		// Plain HTTP metrics: the harness reads them without a token (the secure endpoint is
		// test/monitoring's subject).
		"--metrics-bind-address="+h.metricsAddr, "--metrics-secure=false", "--pprof-bind-address="+h.pprofAddr, "--health-probe-bind-address=0",
		"--secure-port=0", "--webhook-port=0",
		"--kube-api-qps="+strconv.Itoa(h.qps), "--kube-api-burst="+strconv.Itoa(h.burst),
		"--max-concurrent-reconciles="+strconv.Itoa(h.workers), "--zap-log-level="+zapLevel(logLevel))
	cmd.Stdout, cmd.Stderr = log, log
	must(h.t, cmd.Start())
	h.controller = cmd
	h.eventually(30*time.Second, "controller metrics endpoint", func() bool { _, err := h.scrape(); return err == nil })
}

// controllerLog is the path of the controller's log, appended to by every start.
func (h *harness) controllerLog() string { return filepath.Join(h.dir, "controller.log") }

func (h *harness) stopController() {
	if h.controller == nil {
		return
	}
	_ = h.controller.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = h.controller.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = h.controller.Process.Kill()
		<-done
	}
	h.controller = nil
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().String()
}

// scrape reads the controller's metrics endpoint.
func (h *harness) scrape() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + h.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// apiServerIdle waits, up to max, until the kube-apiserver spends less than a tenth of a CPU
// over a second: a floor timed while it still digests earlier writes (watch fan-out, etcd
// compaction) is no lower bound. After idleFallback of that it also takes an audit log that
// has not grown for idleWrites: at 10,000 VMs the API server's own upkeep (and the suite's
// scrape of its metrics) can stay above a tenth of a CPU with nobody writing — round 13's
// first 10,000 run waited the whole 5 minutes after the last write.
func (h *harness) apiServerIdle(max time.Duration) {
	start, size, quietSince := time.Now(), h.auditMark(), time.Now()
	for end := start.Add(max); time.Now().Before(end); {
		before := h.apiServerCPU()
		time.Sleep(time.Second)
		if h.apiServerCPU()-before < 0.1 {
			return
		}
		if now := h.auditMark(); now != size {
			size, quietSince = now, time.Now()
		} else if time.Since(start) >= idleFallback && time.Since(quietSince) >= idleWrites {
			h.t.Logf("the kube-apiserver stayed above a tenth of a CPU for %v; taking %v without a write as idle", idleFallback, idleWrites)
			return
		}
	}
	h.t.Logf("the kube-apiserver did not go idle within %v", max)
}

// apiServerIdle's fallback: after idleFallback of waiting for a tenth of a CPU, no write logged
// for idleWrites (the audit policy logs writes only) will do.
const (
	idleFallback = 30 * time.Second
	idleWrites   = 3 * time.Second
)

// apiServerCPU is the CPU time the kube-apiserver process has used, in seconds, from its own
// process_cpu_seconds_total.
func (h *harness) apiServerCPU() float64 {
	return sum(h.apiServerMetrics(), "process_cpu_seconds_total", "", "")
}

// checkNoConsistencyChecks fails the run unless the kube-apiserver reports
// DetectCacheInconsistency off (its kubernetes_feature_enabled metric): see newHarness.
func (h *harness) checkNoConsistencyChecks() {
	if sum(h.apiServerMetrics(), "kubernetes_feature_enabled", "name", "DetectCacheInconsistency") != 0 {
		h.t.Fatal("the kube-apiserver runs DetectCacheInconsistency; its periodic checks would land in the measured windows")
	}
}

// apiServerMetrics scrapes the kube-apiserver's /metrics.
func (h *harness) apiServerMetrics() map[string]*dto.MetricFamily {
	u, err := url.JoinPath(h.benchCfg.Host, "metrics")
	must(h.t, err)
	resp, err := h.apiHTTP.Get(u)
	must(h.t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		h.t.Fatalf("GET %s: %s", u, resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	must(h.t, err)
	return m
}

// parseMetrics parses a Prometheus text exposition into its metric families.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// sum adds the values of the series of metric name whose label has value (every series when
// label is empty); counters, gauges and untyped metrics.
func sum(m map[string]*dto.MetricFamily, name, label, value string) float64 {
	total := 0.0
	for _, s := range m[name].GetMetric() {
		if label != "" && !slices.ContainsFunc(s.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
			continue
		}
		total += s.GetCounter().GetValue() + s.GetGauge().GetValue() + s.GetUntyped().GetValue()
	}
	return total
}

// histogram adds the sums and counts of the series of histogram name whose label has value
// (every series when label is empty).
func histogram(m map[string]*dto.MetricFamily, name, label, value string) (total float64, count uint64) {
	for _, s := range m[name].GetMetric() {
		if label != "" && !slices.ContainsFunc(s.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == label && l.GetValue() == value }) {
			continue
		}
		total += s.GetHistogram().GetSampleSum()
		count += s.GetHistogram().GetSampleCount()
	}
	return total, count
}

// reconciles is the controller's VirtualMachine reconcile count.
func (h *harness) reconciles() float64 {
	m, err := h.scrape()
	must(h.t, err)
	return sum(m, "controller_runtime_reconcile_total", "controller", "virtualmachine")
}

// controllerCPU is the CPU time the controller process has used, in seconds.
func (h *harness) controllerCPU() float64 {
	m, err := h.scrape()
	must(h.t, err)
	return sum(m, "process_cpu_seconds_total", "", "")
}

// queueDepth is the number of VMs in the controller's work queue.
func (h *harness) queueDepth() float64 {
	m, err := h.scrape()
	must(h.t, err)
	return sum(m, "workqueue_depth", "name", "virtualmachine")
}

// memory returns the controller's heap in use (Go runtime) as found, its live heap and its
// resident set size, in bytes; and, for comparison with rounds up to 13, heap_alloc right after
// a garbage collection. The live heap is the runtime's own count of the bytes the collection
// marked live (go_gc_heap_live_bytes, runtime/metrics /gc/heap/live:bytes, which
// controller-runtime's Go collector exports), read after heapProfile's collection.
// heap_alloc read at the same time counts the objects allocated since as well: the heap
// profile's encoding and compression and the scrape's own, a few MiB.
func (h *harness) memory() (heap, live, allocAfterGC, rss float64) {
	m, err := h.scrape()
	must(h.t, err)
	heap = sum(m, "go_memstats_heap_inuse_bytes", "", "")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.controller.Process.Pid))
	must(h.t, err)
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			rss = kb * 1024
		}
	}
	h.heapProfile()
	m, err = h.scrape()
	must(h.t, err)
	live = sum(m, "go_gc_heap_live_bytes", "", "")
	if live == 0 {
		h.t.Errorf("the controller exports no go_gc_heap_live_bytes: its live heap is unknown")
	}
	return heap, live, sum(m, "go_memstats_heap_alloc_bytes", "", ""), rss
}

// heapProfile fetches the controller's heap profile, which runs a garbage collection first (so
// heap_alloc afterwards is the live heap), and keeps it in VMIPAM_SCALE_PROFILE_DIR when
// that is set (`go tool pprof -sample_index=inuse_space <file>` shows where memory goes).
func (h *harness) heapProfile() {
	resp, err := http.Get("http://" + h.pprofAddr + "/debug/pprof/heap?gc=1")
	must(h.t, err)
	defer resp.Body.Close()
	profile, err := io.ReadAll(resp.Body)
	must(h.t, err)
	if dir := os.Getenv("VMIPAM_SCALE_PROFILE_DIR"); dir != "" {
		must(h.t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("heap-%d.pb.gz", time.Now().Unix())), profile, 0o644))
	}
}

// cpuProfiles starts a CPU profile of the kube-apiserver and one of the controller over the
// next seconds and, when they end, keeps them in VMIPAM_SCALE_PROFILE_DIR as
// apiserver-<what>-<unix>.pb.gz and controller-<what>-<unix>.pb.gz, with this process's own
// (keepOwnProfile) as standins-<what>-<unix>.pb.gz; without that variable it does nothing.
// They show where each process's CPU goes during a phase (`go tool pprof -top <file>`). The
// controller's is skipped when it is not running (the floor).
func (h *harness) cpuProfiles(what string, seconds int) {
	dir := os.Getenv("VMIPAM_SCALE_PROFILE_DIR")
	if dir == "" {
		return
	}
	u, err := url.JoinPath(h.benchCfg.Host, "debug/pprof/profile")
	must(h.t, err)
	query := "?seconds=" + strconv.Itoa(seconds)
	go h.keepProfile(*h.apiHTTP, u+query, filepath.Join(dir, fmt.Sprintf("apiserver-%s-%d.pb.gz", what, time.Now().Unix())), seconds)
	if h.controller != nil {
		go h.keepProfile(http.Client{}, "http://"+h.pprofAddr+"/debug/pprof/profile"+query,
			filepath.Join(dir, fmt.Sprintf("controller-%s-%d.pb.gz", what, time.Now().Unix())), seconds)
	}
	go h.keepOwnProfile(filepath.Join(dir, fmt.Sprintf("standins-%s-%d.pb.gz", what, time.Now().Unix())), seconds)
}

// keepOwnProfile profiles this process — the stand-ins, the suite's watches and the bare
// clients of a floor — for seconds into file, and traces its first ownTraceSeconds of them
// into file with .trace for .pb.gz (`go tool trace -pprof=sync|net|sched <file>` says what
// the stand-ins' goroutines wait on, which a CPU profile does not show). Go allows one CPU
// profile and one trace per process at a time; one that cannot start is logged and skipped.
func (h *harness) keepOwnProfile(file string, seconds int) {
	go h.keepOwn("execution trace", strings.TrimSuffix(file, ".pb.gz")+".trace", min(seconds, ownTraceSeconds), trace.Start, trace.Stop)
	h.keepOwn("CPU profile", file, seconds, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// ownTraceSeconds bounds the execution trace of keepOwnProfile: a busy second of the stand-ins
// is ~10 MB of trace.
const ownTraceSeconds = 5

// keepOwn records this process over seconds into file with start and stop (runtime/pprof's CPU
// profile or runtime/trace); a failure is logged, named what (a profile explains a run, it is
// not one of its figures).
func (h *harness) keepOwn(what, file string, seconds int, start func(io.Writer) error, stop func()) {
	f, err := os.Create(file)
	if err == nil {
		if err = start(f); err == nil {
			time.Sleep(time.Duration(seconds) * time.Second)
			stop()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		h.t.Logf("%s %s: %v", what, file, err)
	}
}

// keepProfile fetches the profile at u, which takes seconds, into file; a failure is logged
// (a profile explains a run, it is not one of its figures).
func (h *harness) keepProfile(c http.Client, u, file string, seconds int) {
	c.Timeout = time.Duration(seconds+60) * time.Second
	resp, err := c.Get(u)
	if err != nil {
		h.t.Logf("CPU profile %s: %v", file, err)
		return
	}
	defer resp.Body.Close()
	profile, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", resp.Status)
	}
	if err == nil {
		err = os.WriteFile(file, profile, 0o644)
	}
	if err != nil {
		h.t.Logf("CPU profile %s: %v", file, err)
	}
}

// auditEntry is the part of an audit event the suite reads.
type auditEntry struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// Received is when the API server received the request, Done when it answered.
	Received time.Time `json:"requestReceivedTimestamp"`
	Done     time.Time `json:"stageTimestamp"`
}

// resource is the entry's resource with its subresource ("virtualmachines/status").
func (e auditEntry) resource() string {
	if e.ObjectRef.Subresource != "" {
		return e.ObjectRef.Resource + "/" + e.ObjectRef.Subresource
	}
	return e.ObjectRef.Resource
}

// ok reports whether the write succeeded.
func (e auditEntry) ok() bool { return e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300 }

// openAt opens the file at path positioned at offset, or returns nil when it does not exist;
// the caller closes it.
func (h *harness) openAt(path string, offset int64) *os.File {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	must(h.t, err)
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		h.t.Fatal(err)
	}
	return f
}

// auditEntries returns the writes logged after mark, in the log's order.
func (h *harness) auditEntries(mark int64) []auditEntry {
	f := h.openAt(h.audit, mark)
	if f == nil {
		return nil
	}
	defer f.Close()
	var out []auditEntry
	dec := json.NewDecoder(f)
	for {
		var e auditEntry
		if err := dec.Decode(&e); err != nil {
			return out
		}
		out = append(out, e)
	}
}

// auditMark is the current end of the audit log; writes counts from there.
func (h *harness) auditMark() int64 {
	fi, err := os.Stat(h.audit)
	if os.IsNotExist(err) {
		return 0
	}
	must(h.t, err)
	return fi.Size()
}

// writeCount is what a client wrote: requests by "verb resource[/subresource]", how many of
// them succeeded, and the distinct objects written per resource.
type writeCount struct {
	// Issued counts every write request, OK those that succeeded (a 409 Conflict of an
	// optimistic-lock patch is issued but changes nothing).
	Issued    map[string]int
	OK        map[string]int
	Succeeded int
	Failed    int
	Objects   map[string]map[string]bool
}

func (w writeCount) total() int { return w.Succeeded + w.Failed }

// writes counts user's writes logged after mark.
func (h *harness) writes(user string, mark int64) writeCount {
	w := writeCount{Issued: map[string]int{}, OK: map[string]int{}, Objects: map[string]map[string]bool{}}
	for _, e := range h.auditEntries(mark) {
		if e.User.Username != user {
			continue
		}
		res := e.resource()
		w.Issued[e.Verb+" "+res]++
		if !e.ok() {
			w.Failed++
			continue
		}
		w.Succeeded++
		w.OK[e.Verb+" "+res]++
		if w.Objects[res] == nil {
			w.Objects[res] = map[string]bool{}
		}
		w.Objects[res][e.ObjectRef.Namespace+"/"+e.ObjectRef.Name] = true
	}
	return w
}

// lateAnswers counts the IPAddresses the controller created after mark that vmipam could have
// reported pending before SDN answered them (plan.unansweredLeft, for new VMs): an address is
// reportable once SDN has been quiet on its network (of, by IPAddress name: its VM and network)
// for grace after its creation, or plan.BacklogGrace after it; once one address of a VM is,
// the VM's record is written with every address still unanswered, so each of them answered
// after that moment counts. Each allows one record patch: the skip, then the attach.
func (h *harness) lateAnswers(mark int64, grace time.Duration, of func(name string) (vm, network string)) int {
	created, answered := map[string]time.Time{}, map[string]time.Time{}
	for _, e := range h.auditEntries(mark) {
		key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
		switch {
		case !e.ok() || e.ObjectRef.Resource != "ipaddresses":
		case e.User.Username == controllerUser && e.Verb == "create":
			created[key] = e.Done
		case e.User.Username == standInUser && e.ObjectRef.Subresource == "status":
			if _, ok := answered[key]; !ok {
				answered[key] = e.Done // the first answer only
			}
		}
	}
	return countLate(created, answered, grace, func(key string) (string, string) {
		ns, name, _ := strings.Cut(key, "/")
		vm, network := of(name)
		return ns + "/" + vm, network
	})
}

// countLate is lateAnswers over the creation and first-answer times by IPAddress key, of
// giving each key's VM and network. Its margins count an address late rather than not: vmipam
// times the grace from the IPAddress's creationTimestamp, which the API server keeps to the
// second, and sees an answer only when its watch delivers it (lateSlack).
func countLate(created, answered map[string]time.Time, grace time.Duration, of func(key string) (vm, network string)) int {
	byNet := map[string][]time.Time{}
	for key, at := range answered {
		_, net := of(key)
		byNet[net] = append(byNet[net], at)
	}
	for _, times := range byNet {
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	}
	quiet := grace - lateSlack
	reportable := map[string]time.Time{} // VM → the earliest moment one of its addresses was
	for key, c := range created {
		x, ok := answered[key]
		if !ok {
			continue
		}
		vm, net := of(key)
		at, ok := quietFrom(byNet[net], c, x, quiet)
		if limit := c.Add(plan.BacklogGrace - lateSlack); limit.Before(x) && (!ok || limit.Before(at)) {
			at, ok = limit, true
		}
		if first, seen := reportable[vm]; ok && (!seen || at.Before(first)) {
			reportable[vm] = at
		}
	}
	n := 0
	for key := range created {
		vm, _ := of(key)
		if at, ok := reportable[vm]; ok && answered[key].After(at) {
			n++
		}
	}
	return n
}

// lateSlack is countLate's margin: the second the creationTimestamp drops, and a second for
// the watch that brings vmipam SDN's answers.
const lateSlack = 2 * time.Second

// quietFrom returns the first moment between from and to at which the sorted answer times
// left quiet without an answer since from or since the answer before; ok is false when there
// is none before to.
func quietFrom(times []time.Time, from, to time.Time, quiet time.Duration) (time.Time, bool) {
	i, _ := slices.BinarySearchFunc(times, from, func(a, b time.Time) int { return a.Compare(b) })
	prev := from
	for ; i < len(times) && times[i].Before(to); i++ {
		if times[i].Sub(prev) >= quiet {
			return prev.Add(quiet), true
		}
		prev = times[i]
	}
	if to.Sub(prev) >= quiet {
		return prev.Add(quiet), true
	}
	return time.Time{}, false
}

// eventually polls cond every 250 ms until it holds, failing the test after timeout.
func (h *harness) eventually(timeout time.Duration, what string, cond func() bool) time.Duration {
	h.t.Helper()
	return h.eventuallyEvery(250*time.Millisecond, timeout, what, cond)
}

// eventuallyEvery polls cond every interval until it holds, failing the test after timeout. A
// timed wait polls a cheap cond often, so the poll does not add to what it times.
func (h *harness) eventuallyEvery(interval, timeout time.Duration, what string, cond func() bool) time.Duration {
	h.t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			h.t.Fatalf("%s: not reached within %s", what, timeout)
		}
		time.Sleep(interval)
	}
	return time.Since(start)
}

// settle waits until the controller's reconcile count stops growing for quiet.
func (h *harness) settle(quiet, timeout time.Duration) {
	h.t.Helper()
	last, since := h.reconciles(), time.Now()
	h.eventually(timeout, "reconciles settling", func() bool {
		now := h.reconciles()
		if now != last {
			last, since = now, time.Now()
		}
		return time.Since(since) >= quiet
	})
}

var _ = rest.Config{}

// envInt is the integer in environment variable name, def when it is unset; anything else
// fails t.
func envInt(t testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	must(t, err)
	return v
}

// zapLevel is --zap-log-level's value for a verbosity: "info" for 0 (the flag takes a name or
// an integer above 0).
func zapLevel(v int) string {
	if v == 0 {
		return "info"
	}
	return strconv.Itoa(v)
}
