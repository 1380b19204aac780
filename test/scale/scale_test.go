package scale

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	vmctrl "github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// The controller's client limits, as cmd/ipam-controller's defaults; the floor uses the same.
const (
	controllerQPS   = 100
	controllerBurst = 200
	// standInQPS and standInBurst are the stand-ins' client limits (startStandIns).
	standInQPS   = 1000
	standInBurst = 2000
)

// workers is the controller's --max-concurrent-reconciles in the suite, and the concurrency of
// the controller's part of the floor: the controller's default, or VMIPAM_SCALE_WORKERS (to
// measure another).
var workers = func() int {
	if w, err := strconv.Atoi(os.Getenv("VMIPAM_SCALE_WORKERS")); err == nil && w > 0 {
		return w
	}
	return vmctrl.DefaultMaxConcurrentReconciles
}()

// result is one run's figures.
type result struct {
	N        int
	Converge time.Duration
	// Floor is the system floor: every write of the outcome, ours and the stand-ins', by bare
	// clients (harness.floor).
	Floor systemFloor
	// PodsAt and AllocatedAt are when the stand-ins had created every launcher pod and
	// allocated every IPAddress, from the same start as Converge.
	PodsAt, AllocatedAt time.Duration
	// ConvergeBudget is every process's CPU seconds during convergence.
	ConvergeBudget cpuBudget
	// StandInWrites are the stand-ins' successful writes during convergence.
	StandInWrites int
	Writes        writeCount
	MinWrites     int
	// LateAnswers counts the Auto IPAddresses SDN answered after vmipam could report them
	// pending (lateAnswers: SDN quiet on their network for UnansweredGrace after their
	// creation, BacklogGrace passed, or a sibling of the same VM reportable). Past the grace
	// vmipam writes the record as it is — the interface skipped with IPAddressPending — and
	// attaches it when SDN answers (DEVELOPMENT.md, "Grace periods for SDN", "SDN's backlog"),
	// so each such IPAddress may honestly cost one more record patch; checkMinimum allows
	// exactly that and no more.
	LateAnswers     int
	ResyncWrites    int
	ReconcilesPerVM float64
	// Changes are the measured policy changes, policyChanges of them (harness.fanOut); the
	// report takes the median of each figure over them (result.change).
	Changes []policyChange
	// OwnGC is the CPU seconds the suite's own process (the stand-ins and the suite's watch)
	// spent collecting garbage (ownGCSeconds) during convergence; policyChange and
	// hotplugResult have theirs.
	OwnGC float64
	// Heap is the controller's heap in use; LiveHeap its live heap after a collection
	// (go_gc_heap_live_bytes), AllocAfterGC heap_alloc read with it (harness.memory); RSS its
	// resident set; all in bytes.
	Heap, LiveHeap, AllocAfterGC, RSS float64
	Hotplug                           hotplugResult
	// GuestInfoKept counts the VMs whose status.guestOSInfo (written once by the
	// virtualization-controller stand-in when the VM starts, unknown to vmipam's Go types)
	// survived every later status Update.
	GuestInfoKept int
	// Repeated lists the VM-object writes of convergence that hit one object more than once
	// (repeatedWrites), Warnings the Warning events about the VMs (a skipped interface), and
	// PolicyErrors and Abandoned the controller's counts of failed decisions and of evaluations
	// abandoned past the deadline: what explains a write above the minimum.
	Repeated, Warnings      []string
	PolicyErrors, Abandoned float64
}

// verify fails t when run r is not correct: writes above the minimum, any write on a resync,
// a policy change writing other VMs than those it targets, or fewer hotplug samples than the
// hp VMs hot-plugged. TestSmoke and every run of TestScale check it.
func verify(t testing.TB, r result, hp int) {
	t.Helper()
	if over := r.checkMinimum(); len(over) > 0 {
		for _, c := range over {
			t.Error(c)
		}
		t.Errorf("objects written more than once: %q; Warning events: %q; failed decisions (PolicyError) %.0f, evaluations abandoned %.0f",
			r.Repeated, r.Warnings, r.PolicyErrors, r.Abandoned)
	}
	if b := r.ConvergeBudget; b.APIServer <= 0 || b.Etcd <= 0 || b.Controller <= 0 || b.Suite <= 0 {
		t.Errorf("CPU seconds during convergence %+v: want every process's read (the report's CPU bound needs them)", b)
	}
	if r.ResyncWrites != 0 {
		t.Errorf("a full resync of converged VMs wrote %d times, want 0", r.ResyncWrites)
	}
	if len(r.Changes) != policyChanges {
		t.Errorf("%d policy changes measured, want %d", len(r.Changes), policyChanges)
	}
	for j, c := range r.Changes {
		want := fmt.Sprint(labelled(fanOutSet(r.N, j)))
		if got := fmt.Sprint(c.WrittenVMs); got != want {
			t.Errorf("policy change %d wrote VMs %s, want exactly %s", j, got, want)
		}
	}
	if r.GuestInfoKept != r.N {
		t.Errorf("status.guestOSInfo survived the status writes on %d of %d VMs", r.GuestInfoKept, r.N)
	}
	if r.Hotplug.Samples != hp {
		t.Errorf("hotplug latency measured on %d VMs, want all %d", r.Hotplug.Samples, hp)
	}
}

// TestSmoke is the small run `make test` includes: N=50, correctness only.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	r := run(t, 50, 10)
	verify(t, r, 10)
	t.Logf("N=%d converge %s (floor %s), VM writes %d (min %d), issued %v, reconciles/VM %.1f, heap %.1f MiB (live %.1f), rss %.1f MiB, hotplug p50 %s, policy change %s (records %s, %d writes served; floor %s, records %s)",
		r.N, r.Converge, r.Floor.Elapsed, r.vmWrites(), r.MinWrites, r.Writes.Issued, r.ReconcilesPerVM, r.Heap/(1<<20), r.LiveHeap/(1<<20), r.RSS/(1<<20), r.Hotplug.P50,
		time.Duration(r.change(changeTime)*1e9), time.Duration(r.change(changeRecords)*1e9), int(r.change(changeServed)),
		time.Duration(r.Floor.fanOut(floorTime)*1e9), time.Duration(r.Floor.fanOut(floorRecords)*1e9))
}

// checkMinimum compares the controller's successful writes with the minimum the outcome needs:
// one create per Auto IPAddress (2N) and one decision record per VM (N creates), and nothing of
// what the virtualization controller owns (VMs, their status, pods). An IPAddress SDN answered
// after vmipam could report it pending adds at most one record patch (LateAnswers): the skip,
// then the attach.
// Events and the start-up writes of the default policy are not part of it.
func (r result) checkMinimum() []string {
	var out []string
	want := map[string]int{"create ipaddresses": 2 * r.N, "create virtualmachineipams": r.N, "patch virtualmachineipams": 0}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		n := want[k]
		got, most := r.Writes.OK[k], n
		if k == "patch virtualmachineipams" {
			most += r.LateAnswers // skipped as IPAddressPending, then attached when SDN answered
		}
		if got < n || got > most {
			out = append(out, fmt.Sprintf("%s: %d writes, minimum %d (at most %d with %d IPAddresses SDN answered after vmipam could report them pending)",
				k, got, n, most, r.LateAnswers))
		}
	}
	for _, k := range theirs {
		if got := r.Writes.OK[k]; got > 0 {
			out = append(out, fmt.Sprintf("%s: %d writes of an object the virtualization controller owns, want none", k, got))
		}
	}
	return out
}

// theirs are the writes of objects the virtualization controller owns, which vmipam never makes.
var theirs = []string{"patch virtualmachines", "update virtualmachines", "patch virtualmachines/status",
	"update virtualmachines/status", "patch pods", "update pods"}

// vmWrites is the sum of the writes checkMinimum counts.
func (r result) vmWrites() int {
	n := r.Writes.OK["create ipaddresses"] + r.Writes.OK["create virtualmachineipams"] + r.Writes.OK["patch virtualmachineipams"]
	for _, k := range theirs {
		n += r.Writes.OK[k]
	}
	return n
}

// labelled are set's VMs as the audit log names their records: namespace/name, sorted.
func labelled(set []string) []string {
	out := make([]string, len(set))
	for i, vm := range set {
		out[i] = ns + "/" + vm
	}
	sort.Strings(out)
	return out
}

func vmName(i int) string { return fmt.Sprintf("vm-%05d", i) }

// run measures one fresh control plane at n VMs, with hotplug latency over hp VMs.
func run(t testing.TB, n, hp int) result {
	ctx := context.Background()
	h := newHarness(t, controllerQPS, controllerBurst)
	r := result{N: n, MinWrites: 3 * n}
	r.Floor = h.floor(ctx, n)

	h.startStandIns()
	netA, netB := h.networks(ctx)
	// VMIPAM_SCALE_LOG_LEVEL raises the controller's log level during convergence (5: a line
	// per reconcile), to explain a run; the default keeps it at info.
	h.startController(envInt(t, "VMIPAM_SCALE_LOG_LEVEL", 0))

	mark := h.auditMark()
	gc, budget, start := ownGCSeconds(), h.cpuBudget(), time.Now()
	h.cpuProfiles("convergence", envInt(t, "VMIPAM_SCALE_PROFILE_SECONDS", 30))
	h.createVMs(ctx, n, netA, netB)
	progress := time.Now()
	h.eventually(time.Duration(n)*time.Second+time.Minute, "convergence", func() bool {
		pods, allocated, ready := h.runningPods(ctx, ns), h.allocated(ctx, ns), h.ready(ctx, ns)
		if r.PodsAt == 0 && pods == n {
			r.PodsAt = time.Since(start)
		}
		if r.AllocatedAt == 0 && allocated == 2*n {
			r.AllocatedAt = time.Since(start)
		}
		if time.Since(progress) >= 5*time.Second { // the timeline, for reading what bounds convergence
			progress = time.Now()
			h.t.Logf("t=%3.0fs launcher pods %d, IPAddresses allocated %d, VMs ready %d, controller reconciles %.0f, queue %.0f",
				time.Since(start).Seconds(), pods, allocated, ready, h.reconciles(), h.queueDepth())
		}
		return ready == n
	})
	r.Converge = time.Since(start)
	r.ConvergeBudget, r.OwnGC = h.cpuBudget().minus(budget), ownGCSeconds()-gc
	h.settle(3*time.Second, 5*time.Minute)
	r.Writes = h.writes(controllerUser, mark)
	r.StandInWrites = h.writes(standInUser, mark).Succeeded
	r.LateAnswers = h.lateAnswers(mark, plan.UnansweredGrace, autoNames(n, netA, netB))
	r.ReconcilesPerVM = h.reconciles() / float64(n)
	r.Heap, r.LiveHeap, r.AllocAfterGC, r.RSS = h.memory()
	r.GuestInfoKept = h.guestInfoKept(ctx, ns)
	r.Repeated = h.repeatedWrites(controllerUser, mark, "create ipaddresses", "create virtualmachineipams", "patch virtualmachineipams")
	r.Warnings = h.warnings(ctx, ns)
	r.PolicyErrors, r.Abandoned = h.evaluationTrouble()
	if len(r.Repeated)+len(r.Warnings) > 0 || r.PolicyErrors > 0 {
		h.t.Logf("convergence: objects written more than once %q; Warning events %q; failed decisions (PolicyError) %.0f, evaluations abandoned %.0f",
			r.Repeated, r.Warnings, r.PolicyErrors, r.Abandoned)
	}

	r.ResyncWrites = h.resync(n)
	h.fanOut(ctx, n, netA, netB, &r)
	r.Hotplug = h.hotplug(ctx, hp, netA)
	h.t.Logf("hotplug of %d VMs at once: p50 %s, p99 %s; stages p50 / p99: %s; %d reconciles of them, %d throttled requests; controller: %s; its writes %v",
		hp, r.Hotplug.P50, r.Hotplug.P99, r.Hotplug.Timeline.summary(), r.Hotplug.Timeline.Reconciles, r.Hotplug.Timeline.Throttled, r.Hotplug.Timeline.Window, r.Hotplug.Timeline.Writes)
	h.stop() // the next run measures its own processes alone
	return r
}

func (h *harness) networks(ctx context.Context) (string, string) {
	for _, o := range []client.Object{
		build.ClusterPool("pool-a", "10.100.0.0/16"), build.ClusterNetwork("net-a", "pool-a"),
		build.ClusterPool("pool-b", "10.101.0.0/16"), build.ClusterNetwork("net-b", "pool-b"),
		build.Namespace(ns),
	} {
		must(h.t, h.bench.Create(ctx, o))
	}
	// The SDN stand-in marks a network Ready shortly after it is created. A VM reconciled
	// before that is honestly NetworkNotReady and written again once the network is Ready:
	// seven such status writes above the minimum in a run's first VMs failed the minimum
	// check (round 6; most likely round 5's 1,008 too). The workload starts on Ready networks.
	h.eventually(time.Minute, "ClusterNetworks net-a and net-b Ready", func() bool {
		for _, name := range []string{"net-a", "net-b"} {
			cn := &sdnv1.ClusterNetwork{}
			if err := h.bench.Get(ctx, types.NamespacedName{Name: name}, cn); err != nil ||
				!meta.IsStatusConditionTrue(cn.Status.Conditions, sdnv1.ConditionReady) {
				return false
			}
		}
		return true
	})
	return "net-a", "net-b"
}

// parallel runs f(i) for i in [0, n) on w goroutines and fails on the first error.
func (h *harness) parallel(n, w int, f func(i int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, w)
	for g := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += w {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatal(err)
	}
}

// autoNames maps the Auto IPAddress names of the n VMs on netA and netB to their VM and
// network (empty for any other name).
func autoNames(n int, netA, netB string) func(name string) (vm, network string) {
	byName := make(map[string][2]string, 2*n)
	for i := range n {
		for _, net := range []string{netA, netB} {
			byName[naming.AutoIPAddress(vmName(i), "ClusterNetwork", net)] = [2]string{vmName(i), net}
		}
	}
	return func(name string) (string, string) { o := byName[name]; return o[0], o[1] }
}

func (h *harness) createVMs(ctx context.Context, n int, netA, netB string) {
	h.parallel(n, 16, func(i int) error {
		return h.bench.Create(ctx, build.VM(ns, vmName(i), build.OnClusterNetwork(netA, ""), build.OnClusterNetwork(netB, "")))
	})
}

// ready counts the namespace's VMs with NetworkReady=True and an address on every interface.
func (h *harness) ready(ctx context.Context, namespace string) int {
	var list vmv1.VirtualMachineList
	if err := h.view.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return -1
	}
	count := 0
	for _, vm := range list.Items {
		if !meta.IsStatusConditionTrue(vm.Status.Conditions, consumer.ConditionNetworkReady) {
			continue
		}
		ok := true
		for _, st := range vm.Status.Networks {
			ok = ok && (st.Type == vmv1.NetworkTypeMain || st.IPAddress != "")
		}
		if ok {
			count++
		}
	}
	return count
}

// resync restarts the controller over converged VMs and returns what it wrote.
func (h *harness) resync(n int) int {
	mark := h.auditMark()
	h.stopController()
	// From here on every reconcile is logged, for the hotplug timeline; resync and fan-out
	// are measured in writes, which logging does not change.
	h.startController(5)
	h.eventually(5*time.Minute, "resync reconciles", func() bool { return h.reconciles() >= float64(n) })
	h.settle(3*time.Second, 5*time.Minute)
	return h.writes(controllerUser, mark).Succeeded
}

// policyChanges is how many policy changes a run measures, each on its own 1% of the VMs:
// one change of a second or two on two shared cores moved by twice from one run to the next
// (round 19: 4.07× and 7.17× at 10,000), so a run reports the median of several, against the
// median of as many floors.
const policyChanges = 3

// policyChange is one measured policy change (harness.change).
type policyChange struct {
	// Target is how many VMs the policy selects; WrittenVMs the records the controller wrote
	// (namespace/name, sorted), Writes all its successful writes until it settled.
	Target     int
	WrittenVMs []string
	Writes     int
	// Time is from the policy's create until every targeted VM's launcher pod carries the
	// change (what its guest waits for: SDN configures the NICs from the pod's networks-spec);
	// Status until every targeted VM's status shows it (the virtualization controller's status
	// write once SDN has configured it); Released until their Auto IPAddresses were all
	// deleted (at least plan.ReleaseGrace after the VMs stopped naming them).
	Time, Status, Released time.Duration
	// Records is from the policy's create until the API server answered the controller's last
	// record write of the change (audit log): vmipam's part of Time.
	Records time.Duration
	// Served counts the writes of every writer the API server answered between the policy's
	// create and Time (audit log): the change's cascade, vmipam's record writes and what the
	// virtualization controller and SDN write in reaction.
	Served int
	// CPU is the controller's CPU seconds from the policy's create until it settled, OwnGC the
	// suite process's collector's (ownGCSeconds).
	CPU, OwnGC float64
	// Budget is every process's CPU seconds from the policy's create until the pods carried it.
	Budget cpuBudget
}

// change is the median of f over r's policy changes.
func (r result) change(f func(policyChange) float64) float64 { return medianBy(r.Changes, f) }

// medianBy is the median of f over xs: the middle one, the upper middle of an even count; 0
// for none.
func medianBy[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	vals := make([]float64, len(xs))
	for i, x := range xs {
		vals[i] = f(x)
	}
	slices.Sort(vals)
	return vals[len(vals)/2]
}

// fanOut measures policyChanges policy changes one after the other into r.Changes, change j on
// the VMs of fanOutSet(n, j).
func (h *harness) fanOut(ctx context.Context, n int, netA, netB string, r *result) {
	for j := range policyChanges {
		r.Changes = append(r.Changes, h.change(ctx, n, j, netA, netB))
	}
}

// change labels the VMs of fanOutSet(n, j), installs a policy making their interfaces L2
// only, and measures what policyChange records: the VMs the controller wrote, its writes, the
// time until those VMs' launcher pods carried the change (podsL2Only: what the guests wait
// for) and until their status showed it (l2Only), the time until their Auto IPAddresses were
// deleted (a ReleaseGrace after the change: released) and the controller's CPU seconds until
// it settled.
func (h *harness) change(ctx context.Context, n, j int, netA, netB string) policyChange {
	set := fanOutSet(n, j)
	label := []byte(fmt.Sprintf(`{"metadata":{"labels":{"fanout":"%d"}}}`, j))
	h.parallel(len(set), 8, func(i int) error {
		return h.bench.Patch(ctx, &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set[i]}},
			client.RawPatch(types.MergePatchType, label))
	})
	h.settle(3*time.Second, 5*time.Minute)
	collectOwnGarbage()
	// Its floor is measured on an idle API server; so is the change. Until round 13 the SDN
	// stand-in wrote the attachments of the last addresses (one status write each, queued
	// behind its allocations) minutes after convergence at 10,000 VMs: round 12's first run
	// timed the change amid ~100 of those writes a second.
	h.apiServerIdle(5 * time.Minute)
	pods := h.launcherPods(ctx, ns)
	mark := h.auditMark()
	p, err := policies.Builtin()
	must(h.t, err)
	p.ObjectMeta = metav1.ObjectMeta{Name: fmt.Sprintf("fanout-%d", j)}
	p.Spec.Priority = 10
	p.Spec.Match.VMSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fanout": strconv.Itoa(j)}}
	p.Spec.Allocation = &v1alpha1.Expression{Expression: "'None'"}
	p.Spec.SkipRules = nil
	h.cpuProfiles("policychange", 3)
	c := policyChange{Target: len(set)}
	cpu, gc := h.controllerCPU(), ownGCSeconds()
	budget, start := h.cpuBudget(), time.Now() // after the scrape, which it would count
	must(h.t, h.bench.Create(ctx, p))
	h.eventuallyEvery(10*time.Millisecond, 5*time.Minute, "fan-out", func() bool { return h.podsL2Only(ctx, set, pods, netA, netB) })
	c.Time = time.Since(start)
	c.Budget = h.cpuBudget().minus(budget)
	c.Records, c.Served = h.fanOutCascade(mark, start, c.Time)
	if c.Records <= 0 || c.Served < len(set) {
		h.t.Errorf("policy change %d: the audit log shows the controller's last record write %v after the create and %d writes until the pods carried it; want a record write per VM (%d)",
			j, c.Records, c.Served, len(set))
	}
	h.eventuallyEvery(10*time.Millisecond, 5*time.Minute, "fan-out status", func() bool { return h.l2Only(ctx, set, netA, netB) })
	c.Status = time.Since(start)
	h.eventuallyEvery(10*time.Millisecond, 5*time.Minute, "fan-out release", func() bool { return h.released(ctx, set, netA, netB) })
	c.Released = time.Since(start)
	if c.Released < plan.ReleaseGrace {
		h.t.Errorf("policy change %d: IPAddresses deleted %v after the policy's create, before ReleaseGrace (%v)", j, c.Released, plan.ReleaseGrace)
	}
	h.settle(3*time.Second, 5*time.Minute)
	c.CPU, c.OwnGC = h.controllerCPU()-cpu, ownGCSeconds()-gc
	w := h.writes(controllerUser, mark)
	for name := range w.Objects["virtualmachineipams"] {
		c.WrittenVMs = append(c.WrittenVMs, name)
	}
	sort.Strings(c.WrittenVMs)
	c.Writes = w.Succeeded
	h.t.Logf("policy change %d/%d: pods carried it after %v (the controller's records %v, %d writes served), status %v, released %v",
		j+1, policyChanges, c.Time, c.Records, c.Served, c.Status, c.Released)
	return c
}

// Figures of a policy change and of its floor, in seconds or counts, for medianBy.
func changeTime(c policyChange) float64    { return c.Time.Seconds() }
func changeRecords(c policyChange) float64 { return c.Records.Seconds() }
func changeServed(c policyChange) float64  { return float64(c.Served) }
func floorTime(f fanOutFloor) float64      { return f.All.Seconds() }
func floorRecords(f fanOutFloor) float64   { return f.Records.Seconds() }

// fanOutSet are the names of the VMs policy change j of a run at n VMs selects: fanOutK(n) of
// them, each change its own.
func fanOutSet(n, j int) []string {
	k := fanOutK(n)
	out := make([]string, k)
	for i := range k {
		out[i] = vmName(j*k + i)
	}
	return out
}

// fanOutCascade reads the audit log from mark: how long after start the API server answered the
// controller's last record write, and how many writes of every writer it answered within
// elapsed of start (both clocks are this machine's).
func (h *harness) fanOutCascade(mark int64, start time.Time, elapsed time.Duration) (records time.Duration, served int) {
	end := start.Add(elapsed)
	for _, e := range h.auditEntries(mark) {
		if !e.ok() || e.Done.Before(start) {
			continue
		}
		if e.User.Username == controllerUser && e.ObjectRef.Resource == "virtualmachineipams" && e.ObjectRef.Subresource == "" {
			records = max(records, e.Done.Sub(start))
		}
		if !e.Done.After(end) {
			served++
		}
	}
	return records, served
}

// podsL2Only: the launcher pods (pods maps VM names to them) of the VMs set attach both
// networks without addresses — the virtualization controller applied the change.
func (h *harness) podsL2Only(ctx context.Context, set []string, pods map[string]string, netA, netB string) bool {
	for _, vm := range set {
		pod := &corev1.Pod{}
		if err := h.view.Get(ctx, types.NamespacedName{Namespace: ns, Name: pods[vm]}, pod); err != nil {
			return false
		}
		entries, err := sdnv1.ParseNetworksSpec(pod.Annotations[sdnv1.AnnotationNetworksSpec])
		if err != nil {
			return false
		}
		attached := 0
		for _, e := range entries {
			if e.Name == netA || e.Name == netB {
				if len(e.IPAddressNames) > 0 {
					return false
				}
				attached++
			}
		}
		if attached != 2 {
			return false
		}
	}
	return true
}

// l2Only: the VMs set attach both networks without addresses: their status shows no address
// on either network with NetworkReady True — written by the virtualization controller only
// once the running pod's networks-spec without address names landed and SDN answered it.
func (h *harness) l2Only(ctx context.Context, set []string, netA, netB string) bool {
	for _, name := range set {
		vm := &vmv1.VirtualMachine{}
		if err := h.view.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vm); err != nil ||
			!meta.IsStatusConditionTrue(vm.Status.Conditions, consumer.ConditionNetworkReady) {
			return false
		}
		for _, n := range vm.Status.Networks {
			if (n.Name == netA || n.Name == netB) && n.IPAddress != "" {
				return false
			}
		}
	}
	return true
}

// released: the Auto IPAddresses of the VMs set are gone.
func (h *harness) released(ctx context.Context, set []string, netA, netB string) bool {
	for _, vm := range set {
		for _, net := range []string{netA, netB} {
			ip := &sdnv1.IPAddress{}
			if err := h.view.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.AutoIPAddress(vm, "ClusterNetwork", net)}, ip); err == nil {
				return false
			}
		}
	}
	return true
}

// hotplugResult is the hotplug latency over the hot-plugged VMs and its timeline.
type hotplugResult struct {
	P50, P99 time.Duration
	Samples  int
	Timeline timeline
	// OwnGC is the CPU seconds the suite's own process spent collecting garbage from the
	// IPAddresses' creates until settled (ownGCSeconds).
	OwnGC float64
}

// hotplug measures, over m running VMs waiting for a missing static IPAddress, the time from
// SDN allocating the IPAddress to the running pod's networks-spec carrying it, as the suite's
// watch sees both, and the timeline of each (hotplugTimeline).
func (h *harness) hotplug(ctx context.Context, m int, net string) hotplugResult {
	return h.hotplugIn(ctx, hns, 200, m, net)
}

// hotplugIn is hotplug in namespace (one the suite's view watches), the static addresses
// taken from 10.100.<octet>.0/24.
func (h *harness) hotplugIn(ctx context.Context, hns string, octet, m int, net string) hotplugResult {
	must(h.t, h.bench.Create(ctx, build.Namespace(hns)))
	h.parallel(m, 8, func(i int) error {
		return h.bench.Create(ctx, build.VM(hns, fmt.Sprintf("hp-%03d", i), build.OnClusterNetwork(net, fmt.Sprintf("ip-%03d", i))))
	})
	h.eventually(5*time.Minute, "hotplug VMs running", func() bool { return h.runningPods(ctx, hns) == m })
	collectOwnGarbage()
	h.settle(2*time.Second, 5*time.Minute)
	pods := h.launcherPods(ctx, hns)
	auditMark, logOffset, window := h.auditMark(), h.fileSize(h.controllerLog()), h.controllerWindowAt()
	allocated := map[string]time.Time{}
	carried := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		deadline := time.Now().Add(5 * time.Minute)
		for len(carried) < m && time.Now().Before(deadline) {
			h.observeHotplug(ctx, hns, allocated, carried)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	h.cpuProfiles("hotplug", 3)
	gc := ownGCSeconds()
	h.parallel(m, 8, func(i int) error {
		return h.bench.Create(ctx, build.StaticIPAddress(hns, fmt.Sprintf("ip-%03d", i), "ClusterNetwork", net,
			fmt.Sprintf("10.100.%d.%d", octet, i+1)))
	})
	<-done
	h.settle(2*time.Second, 5*time.Minute)
	ownGC := ownGCSeconds() - gc
	var lat []time.Duration
	marks := make([]*hotplugMarks, m)
	for i := range m {
		ip, vm := fmt.Sprintf("ip-%03d", i), fmt.Sprintf("hp-%03d", i)
		marks[i] = &hotplugMarks{ip: ip, vm: vm, pod: pods[vm], observedTime: carried[ip]}
		if at, ok := carried[ip]; ok && !allocated[ip].IsZero() {
			lat = append(lat, max(0, at.Sub(allocated[ip])))
		}
	}
	if w := h.warnings(ctx, hns); len(w) > 0 {
		h.t.Logf("hotplug: Warning events in %s %q", hns, w)
	}
	tl := h.hotplugTimeline(hns, marks, auditMark, logOffset)
	tl.Writes = h.writes(controllerUser, auditMark).Issued
	tl.Window = h.controllerWindowAt().minus(window)
	return hotplugResult{P50: percentile(lat, 50), P99: percentile(lat, 99), Samples: len(lat), Timeline: tl, OwnGC: ownGC}
}

// guestInfoKept counts the namespace's VMs whose status.guestOSInfo is the virtualization-controller
// stand-in's, read from the API server as unstructured objects (the Go type drops the field).
func (h *harness) guestInfoKept(ctx context.Context, namespace string) int {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(vmv1.GroupVersion.WithKind("VirtualMachineList"))
	must(h.t, h.bench.List(ctx, list, client.InNamespace(namespace)))
	want := fmt.Sprint(virtualization.GuestOSInfo)
	count := 0
	for _, vm := range list.Items {
		if got, ok, _ := unstructured.NestedMap(vm.Object, "status", virtualization.StatusGuestOSInfo); ok && fmt.Sprint(got) == want {
			count++
		}
	}
	return count
}

// allocated counts the namespace's IPAddresses with an address.
func (h *harness) allocated(ctx context.Context, namespace string) int {
	var list sdnv1.IPAddressList
	if err := h.view.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return -1
	}
	count := 0
	for _, ip := range list.Items {
		if ip.Status.Address != "" {
			count++
		}
	}
	return count
}

func (h *harness) runningPods(ctx context.Context, namespace string) int {
	var pods corev1.PodList
	if err := h.view.List(ctx, &pods, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return -1
	}
	return len(pods.Items)
}

// observeHotplug records the first time each IPAddress is seen allocated and each pod seen
// carrying it.
func (h *harness) observeHotplug(ctx context.Context, namespace string, allocated, carried map[string]time.Time) {
	var ips sdnv1.IPAddressList
	var pods corev1.PodList
	if h.view.List(ctx, &ips, client.InNamespace(namespace), client.UnsafeDisableDeepCopy) != nil ||
		h.view.List(ctx, &pods, client.InNamespace(namespace), client.UnsafeDisableDeepCopy) != nil {
		return
	}
	now := time.Now()
	for _, ip := range ips.Items {
		if _, seen := allocated[ip.Name]; !seen && ip.Status.Address != "" {
			allocated[ip.Name] = now
		}
	}
	for _, p := range pods.Items {
		for _, name := range carriedNames(p.Annotations[sdnv1.AnnotationNetworksSpec]) {
			if _, seen := carried[name]; !seen {
				carried[name] = now
			}
		}
	}
}

// systemFloor is what the writes of the outcome cost with nothing else running.
type systemFloor struct {
	// Elapsed is until the last write of both parts; Controller until the last of the
	// controller's part.
	Elapsed, Controller time.Duration
	// Budget is every process's CPU seconds meanwhile.
	Budget cpuBudget
	// FanOuts are the policy change's floors, one per measured change (policyChanges), each
	// on fanOutSet's objects of its change; the report takes their medians (fanOut).
	FanOuts []fanOutFloor
}

// fanOutFloor is the time of the writes of a policy change re-deciding fanOutK(n) VMs (every
// interface L2 only) that the guests wait for: per VM the record's patch by the controller's
// bare client at its limits and concurrency and, once that is written, the launcher pod's
// networks-spec by the virtualization controller's at its own (fanOutFloorRecord,
// fanOutFloorPod).
type fanOutFloor struct {
	// Records is the time of the record writes alone (they start together with the pod
	// writes, which follow them); All until the last pod write.
	Records, All time.Duration
	// Budget is every process's CPU seconds meanwhile.
	Budget cpuBudget
}

// fanOut is the median of g over f's policy-change floors.
func (f systemFloor) fanOut(g func(fanOutFloor) float64) float64 { return medianBy(f.FanOuts, g) }

// Stand-in concurrency in the floor: the stand-ins' workers (virtualization.Workers for the
// virtualization controller's writes, sdn.IPAddressWorkers for an IPAddress's answer and lease,
// sdn.AttachWorkers for its attachment, 1 for networks-status).
const (
	floorRuntimeWorkers = virtualization.Workers
	floorSDNWorkers     = sdn.IPAddressWorkers
	floorAttachWorkers  = sdn.AttachWorkers
	floorPodWorkers     = 1
)

// floor times every write of the outcome with nothing else running — the controller's (2
// IPAddress creates and the record's: floorWrites) and the stand-ins' (the virtualization
// controller's KVVM, launcher pod, pod networks-spec, VM status and record status:
// runtimeFloorWrites; SDN's answer and lease of each IPAddress: sdnFloorWrites, and its
// attachment: attachFloorWrites; and the pod's networks-status) — each part by a bare client
// with its writer's QPS, burst and concurrency, all parts at once, and the
// kube-apiserver's CPU seconds meanwhile. The objects written to are created beforehand
// (untimed) in a namespace of their own, so no write waits on another; they are removed
// afterwards, before the stand-ins and the controller start.
func (h *harness) floor(ctx context.Context, n int) systemFloor {
	const fns = "floor"
	must(h.t, h.bench.Create(ctx, build.Namespace(fns)))
	h.parallel(n, 16, func(i int) error { return createFloorObjects(ctx, h.bench, fns, vmName(i)) })
	c := h.client(floorUser, controllerQPS, controllerBurst)
	sc := h.client(floorUser+"-standins", standInQPS, standInBurst)
	var f systemFloor
	collectOwnGarbage()
	budget, start := h.cpuBudget(), time.Now()
	h.cpuProfiles("floor", envInt(h.t, "VMIPAM_SCALE_PROFILE_SECONDS", 30)*2/3)
	var wg sync.WaitGroup
	for _, part := range []struct {
		workers int
		write   func(i int) error
		done    *time.Duration
	}{
		{workers, func(i int) error { return floorWrites(ctx, c, fns, vmName(i)) }, &f.Controller},
		{floorRuntimeWorkers, func(i int) error { return runtimeFloorWrites(ctx, sc, fns, vmName(i)) }, nil},
		{floorSDNWorkers, func(i int) error { return sdnFloorWrites(ctx, sc, fns, vmName(i)) }, nil},
		{floorAttachWorkers, func(i int) error { return attachFloorWrites(ctx, sc, fns, vmName(i)) }, nil},
		{floorPodWorkers, func(i int) error { return podStatusFloorWrite(ctx, sc, fns, vmName(i)) }, nil},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.parallel(n, part.workers, part.write)
			if part.done != nil {
				*part.done = time.Since(start)
			}
		}()
	}
	wg.Wait()
	f.Elapsed, f.Budget = time.Since(start), h.cpuBudget().minus(budget)
	for j := range policyChanges {
		f.FanOuts = append(f.FanOuts, h.fanOutFloor(ctx, fns, fanOutSet(n, j)))
	}
	h.deleteAll(ctx, fns)
	return f
}

// fanOutFloor measures the policy change's floor on the floor objects of the VMs set, in
// namespace fns.
func (h *harness) fanOutFloor(ctx context.Context, fns string, set []string) fanOutFloor {
	// The fan-out floor gets clients of its own, their rate limiters full as the controller's
	// is after the quiet before a policy edit, and an API server done with earlier writes: the
	// first round-9 run reused the system floor's drained client (300 writes at 100 QPS) and
	// measured a floor twice the controller's time.
	cf := h.client(floorUser+"-fanout", controllerQPS, controllerBurst)
	sf := h.client(floorUser+"-fanout-standins", standInQPS, standInBurst)
	collectOwnGarbage()
	h.apiServerIdle(time.Minute)
	// A VM's pod patch follows its record's (the virtualization controller applies what the
	// record decides), so each VM's pod write waits for its record write; the two writers
	// otherwise run side by side, each with its own workers.
	recorded := make([]chan struct{}, len(set))
	for i := range recorded {
		recorded[i] = make(chan struct{})
	}
	var f fanOutFloor
	budget, start := h.cpuBudget(), time.Now()
	var fanOut sync.WaitGroup
	fanOut.Go(func() {
		h.parallel(len(set), workers, func(i int) error {
			defer close(recorded[i])
			return fanOutFloorRecord(ctx, cf, fns, set[i])
		})
		f.Records = time.Since(start)
	})
	fanOut.Go(func() {
		h.parallel(len(set), floorRuntimeWorkers, func(i int) error {
			<-recorded[i]
			return fanOutFloorPod(ctx, sf, fns, set[i])
		})
	})
	fanOut.Wait()
	f.All, f.Budget = time.Since(start), h.cpuBudget().minus(budget)
	return f
}

// fanOutK is how many VMs the policy change selects: 1%.
func fanOutK(n int) int { return max(1, n/100) }

// createFloorObjects creates what the floor writes to for one VM: the VM, its launcher pod,
// the two IPAddresses SDN's part answers (the controller's part creates two of its own), the
// record whose status the virtualization controller's part writes and the one the policy
// change's floor patches (the controller's part creates one of its own).
func createFloorObjects(ctx context.Context, c client.Client, namespace, name string) error {
	if err := c.Create(ctx, build.VM(namespace, name, build.OnClusterNetwork("a", ""), build.OnClusterNetwork("b", ""))); err != nil {
		return err
	}
	if err := c.Create(ctx, floorPod(namespace, name)); err != nil {
		return err
	}
	for _, rec := range []string{name + "-applied", name + "-changed"} {
		if err := c.Create(ctx, floorRecord(namespace, rec, "x", "y")); err != nil {
			return err
		}
	}
	for _, net := range []string{"a", "b"} {
		if err := c.Create(ctx, floorIPAddress(namespace, "sdn-"+name+"-"+net, net)); err != nil {
			return err
		}
	}
	return nil
}

func floorPod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{vmv1.LabelLauncherVMName: name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "stand-in"}}}}
}

func floorIPAddress(namespace, name, net string) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: net}}}
}

// runtimeFloorWrites are the virtualization controller's five writes for one VM: the KVVM's
// create, the launcher pod's (a second pod, as the first is the one the others patch), the
// running pod's networks-spec once the record decides, the VM's status and the record's.
func runtimeFloorWrites(ctx context.Context, c client.Client, namespace, name string) error {
	kvvm := &unstructured.Unstructured{}
	kvvm.SetGroupVersionKind(virtualization.KVVMKind)
	kvvm.SetNamespace(namespace)
	kvvm.SetName(name)
	if err := unstructured.SetNestedStringMap(kvvm.Object, map[string]string{}, "spec", "template", "metadata", "annotations"); err != nil {
		return err
	}
	if err := c.Create(ctx, kvvm); err != nil {
		return err
	}
	if err := c.Create(ctx, floorPod(namespace, name+"-launcher")); err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, floorNetworksSpec("x", "y"))); err != nil {
		return err
	}
	status := []byte(`{"status":{"phase":"Running","networks":[{"type":"Main"},{"type":"ClusterNetwork","name":"a","ipAddress":"10.0.0.1"},` +
		`{"type":"ClusterNetwork","name":"b","ipAddress":"10.0.1.1"}],"conditions":[{"type":"NetworkReady","status":"True",` +
		`"reason":"NetworkReady","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Status().Patch(ctx, vm, client.RawPatch(types.MergePatchType, status)); err != nil {
		return err
	}
	rec := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-applied"}}
	return c.Status().Patch(ctx, rec, client.RawPatch(types.MergePatchType, []byte(`{"status":{"observedGeneration":1}}`)))
}

// floorNetworksSpec is a merge patch of a networks-spec annotation attaching a and b with the
// IPAddresses named.
func floorNetworksSpec(a, b string) []byte {
	return []byte(`{"metadata":{"annotations":{"network.deckhouse.io/networks-spec":` +
		strconv.Quote(`[{"id":1,"type":"ClusterNetwork","name":"a","ifName":"veth_cn00000000","uid":64535,"gid":64535,"ipAssignmentMode":"DHCP","ipAddressNames":["`+a+`"]},`+
			`{"id":2,"type":"ClusterNetwork","name":"b","ifName":"veth_cn00000001","uid":64535,"gid":64535,"ipAssignmentMode":"DHCP","ipAddressNames":["`+b+`"]}]`) + `}}}`)
}

// floorRecord is a decision record attaching a and b with the IPAddresses named, as vmipam
// writes one for a converged VM of the suite.
func floorRecord(namespace, name, a, b string) *v1alpha1.VirtualMachineIPAM {
	decided := func(net, ip string) v1alpha1.InterfaceDecision {
		return v1alpha1.InterfaceDecision{Type: "ClusterNetwork", Name: net, Allocation: v1alpha1.AllocationAuto, IPAddressName: ip,
			Address: "10.0.0.1", Attach: true, Hotplug: true, DecidedBy: &v1alpha1.Provenance{Allocation: "default", Hotplug: "default"}}
	}
	return &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: "uid", VMGeneration: 1, Interfaces: []v1alpha1.InterfaceDecision{decided("a", a), decided("b", b)},
			Summary: v1alpha1.RecordSummary{Attached: "2/2"}}}
}

// sdnFloorWrites are SDN's two writes for each of one VM's two IPAddresses, as the SDN
// stand-in's allocator (sdn-sim-ipaddress) makes them one after the other on one of its
// workers: the answer (status Allocated with the address) and the address's IPAddressLease.
func sdnFloorWrites(ctx context.Context, c client.Client, namespace, name string) error {
	for i, net := range []string{"a", "b"} {
		ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "sdn-" + name + "-" + net}}
		addr := fmt.Sprintf("10.%d.0.1", i)
		allocated := fmt.Appendf(nil, `{"status":{"phase":"Allocated","address":%q,"conditions":[{"type":"Allocated","status":"True",`+
			`"reason":"IPAddressAllocated","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, addr)
		if err := c.Status().Patch(ctx, ip, client.RawPatch(types.MergePatchType, allocated)); err != nil {
			return err
		}
		if err := c.Create(ctx, floorLease(namespace, ip.Name, net, addr)); err != nil {
			return err
		}
	}
	return nil
}

// attachFloorWrites are the attachments (condition Attached and status.usedByPods) of one VM's
// two IPAddresses, as the SDN stand-in's node agents (sdn-sim-attach) write them once the
// launcher pod reports the addresses configured. The status is written whole, as the
// allocator's part may not have written its answer yet.
func attachFloorWrites(ctx context.Context, c client.Client, namespace, name string) error {
	for i, net := range []string{"a", "b"} {
		ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "sdn-" + name + "-" + net}}
		attached := fmt.Appendf(nil, `{"status":{"phase":"Allocated","address":"10.%d.0.1","usedByPods":[{"namespace":%q,"name":%q}],"conditions":[{"type":"Allocated","status":"True",`+
			`"reason":"IPAddressAllocated","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"},{"type":"Attached","status":"True",`+
			`"reason":"StandInConfiguredInPod","message":"configured in pod %s","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`, i, namespace, name, name)
		if err := c.Status().Patch(ctx, ip, client.RawPatch(types.MergePatchType, attached)); err != nil {
			return err
		}
	}
	return nil
}

// floorLeaseLabel marks the floor's IPAddressLeases, which are cluster-scoped, for deleteAll.
const floorLeaseLabel = "scale.vmipam.io/floor"

// floorLease is the lease SDN keeps for addr, the address of the floor's IPAddress ip on
// ClusterNetwork net, as the SDN stand-in writes one.
func floorLease(namespace, ip, net, addr string) *sdnv1.IPAddressLease {
	return &sdnv1.IPAddressLease{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-" + ip, Labels: map[string]string{floorLeaseLabel: "true"},
			Annotations: map[string]string{sdn.AnnotationLeasePool: "ClusterNetwork//" + net,
				sdn.AnnotationLeaseIPAddress: namespace + "/" + ip, sdn.AnnotationLeaseIPAddressUID: "uid"}},
		Spec: sdnv1.IPAddressLeaseSpec{IP: addr},
	}
}

// podStatusFloorWrite is SDN's networks-status on one launcher pod.
func podStatusFloorWrite(ctx context.Context, c client.Client, namespace, name string) error {
	status := []byte(`{"metadata":{"annotations":{"network.deckhouse.io/networks-status":` +
		strconv.Quote(`[{"type":"ClusterNetwork","name":"a","ifName":"veth_cn00000000","mac":"02:00:00:00:00:01","conditions":[{"type":"Configured","status":"True"}]},`+
			`{"type":"ClusterNetwork","name":"b","ifName":"veth_cn00000001","mac":"02:00:00:00:00:02","conditions":[{"type":"Configured","status":"True"}]}]`) + `}}}`)
	return c.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, client.RawPatch(types.MergePatchType, status))
}

// fanOutFloorRecord is vmipam's write of a policy change making one VM's interfaces L2 only
// that its guest waits for: the record's patch. Its two IPAddresses are deleted ReleaseGrace
// later, outside the measured time, so the floor leaves them out.
func fanOutFloorRecord(ctx context.Context, c client.Client, namespace, name string) error {
	patch := []byte(`{"spec":{"interfaces":[{"type":"ClusterNetwork","name":"a","allocation":"None","attach":true,"hotplug":true},` +
		`{"type":"ClusterNetwork","name":"b","allocation":"None","attach":true,"hotplug":true}]}}`)
	rec := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-changed"}}
	return c.Patch(ctx, rec, client.RawPatch(types.MergePatchType, patch))
}

// fanOutFloorPod is the virtualization controller's write of the same change that the guest
// waits for: the running launcher pod's networks-spec, both networks without addresses. The
// status it writes once SDN has configured the NICs is reported apart (FanOutStatus), so the
// floor leaves it out.
func fanOutFloorPod(ctx context.Context, c client.Client, namespace, name string) error {
	patch := []byte(`{"metadata":{"annotations":{"network.deckhouse.io/networks-spec":` +
		strconv.Quote(`[{"id":1,"type":"ClusterNetwork","name":"a","ifName":"veth_cn00000000","uid":64535,"gid":64535},`+
			`{"id":2,"type":"ClusterNetwork","name":"b","ifName":"veth_cn00000001","uid":64535,"gid":64535}]`) + `}}}`)
	return c.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}, client.RawPatch(types.MergePatchType, patch))
}

// deleteAll removes the floor's objects. A deletecollection of 10,000 objects can outlast the
// API server's request timeout, so a timeout is waited out and the deletion asked for again.
func (h *harness) deleteAll(ctx context.Context, namespace string) {
	kvvm := &unstructured.Unstructured{}
	kvvm.SetGroupVersionKind(virtualization.KVVMKind)
	kvvms := &unstructured.UnstructuredList{}
	kvvms.SetGroupVersionKind(virtualization.KVVMKind.GroupVersion().WithKind(virtualization.KVVMKind.Kind + "List"))
	lists := map[client.Object]client.ObjectList{
		&vmv1.VirtualMachine{}: &vmv1.VirtualMachineList{}, &corev1.Pod{}: &corev1.PodList{}, &sdnv1.IPAddress{}: &sdnv1.IPAddressList{},
		&v1alpha1.VirtualMachineIPAM{}: &v1alpha1.VirtualMachineIPAMList{}, kvvm: kvvms,
	}
	for obj, list := range lists {
		deleteAll := func() {
			// Any error — a timeout, or the HTTP/2 stream the API server resets when its
			// request timeout cuts the deletecollection short (seen at 10,000 pods) — is
			// answered by asking again: the loop below fails only if objects remain.
			if err := h.bench.DeleteAllOf(ctx, obj, client.InNamespace(namespace), client.GracePeriodSeconds(0)); err != nil {
				h.t.Logf("floor cleanup: %v (asked again until nothing is left)", err)
			}
		}
		deleteAll()
		asked := time.Now()
		// A timed-out deletecollection may stop part-way (seen with 20,000 IPAddresses): ask
		// again every 10 s until nothing is left.
		h.eventually(10*time.Minute, "floor cleanup", func() bool {
			if err := h.bench.List(ctx, list, client.InNamespace(namespace), client.Limit(1)); err != nil || meta.LenList(list) > 0 {
				if time.Since(asked) > 10*time.Second {
					deleteAll()
					asked = time.Now()
				}
				return false
			}
			return true
		})
	}
	leases := &sdnv1.IPAddressLeaseList{}
	h.eventually(10*time.Minute, "floor cleanup of IPAddressLeases", func() bool {
		if err := h.bench.DeleteAllOf(ctx, &sdnv1.IPAddressLease{}, client.MatchingLabels{floorLeaseLabel: "true"}, client.GracePeriodSeconds(0)); err != nil {
			h.t.Logf("floor cleanup: %v (asked again until nothing is left)", err)
		}
		return h.bench.List(ctx, leases, client.MatchingLabels{floorLeaseLabel: "true"}, client.Limit(1)) == nil && len(leases.Items) == 0
	})
}

// floorWrites are the controller's three writes one converged VM needs: two IPAddresses and
// the decision record.
func floorWrites(ctx context.Context, c client.Client, namespace, name string) error {
	names := map[string]string{}
	for _, net := range []string{"a", "b"} {
		names[net] = naming.AutoIPAddress(name, "ClusterNetwork", net)
		ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: names[net]},
			Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: net}}}
		if err := c.Create(ctx, ip); err != nil {
			return err
		}
	}
	return c.Create(ctx, floorRecord(namespace, name, names["a"], names["b"]))
}
