package scale

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	vmctrl "github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
	"github.com/vmipam/vmipam/test/sim/vmruntime"
)

// The controller's client limits, as cmd/ipam-controller's defaults; the floor uses the same.
const (
	controllerQPS   = 100
	controllerBurst = 200
	// workers is the controller's MaxConcurrentReconciles default, the floor's concurrency.
	workers = 4
)

// result is one run's figures.
type result struct {
	N               int
	Converge, Floor time.Duration
	// PodsAt and AllocatedAt are when the stand-ins had created every launcher pod and
	// allocated every IPAddress, from the same start as Converge.
	PodsAt, AllocatedAt time.Duration
	// ConvergeCPU and FloorCPU are the kube-apiserver's CPU seconds during each.
	ConvergeCPU, FloorCPU float64
	// StandInWrites are the stand-ins' successful writes during convergence.
	StandInWrites          int
	Writes                 writeCount
	MinWrites              int
	ResyncWrites           int
	ReconcilesPerVM        float64
	FanOutTarget           int
	FanOutWrittenVMs       []string
	FanOutWrites           int
	FanOutTime             time.Duration
	Heap, LiveHeap, RSS    float64
	HotplugP50, HotplugP99 time.Duration
	HotplugSamples         int
	// GuestInfoKept counts the VMs whose status.guestOSInfo (written by the VM-runtime
	// stand-in, unknown to vmipam's Go types) survived vmipam's writes.
	GuestInfoKept int
}

// verify fails t when run r is not correct: writes above the minimum, any write on a resync,
// a policy change writing other VMs than those it targets, or fewer hotplug samples than the
// hp VMs hot-plugged. TestSmoke and every run of TestScale check it.
func verify(t testing.TB, r result, hp int) {
	t.Helper()
	for _, c := range r.checkMinimum() {
		t.Error(c)
	}
	if r.ResyncWrites != 0 {
		t.Errorf("a full resync of converged VMs wrote %d times, want 0", r.ResyncWrites)
	}
	want := fmt.Sprint(labelled(r.FanOutTarget))
	if got := fmt.Sprint(r.FanOutWrittenVMs); got != want {
		t.Errorf("policy change wrote VMs %s, want exactly %s", got, want)
	}
	if r.GuestInfoKept != r.N {
		t.Errorf("status.guestOSInfo survived vmipam's writes on %d of %d VMs", r.GuestInfoKept, r.N)
	}
	if r.HotplugSamples != hp {
		t.Errorf("hotplug latency measured on %d VMs, want all %d", r.HotplugSamples, hp)
	}
}

// TestSmoke is the small run `make test` includes: N=50, correctness only.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	r := run(t, 50, 10)
	verify(t, r, 10)
	t.Logf("N=%d converge %s (floor %s), VM writes %d (min %d), issued %v, reconciles/VM %.1f, heap %.1f MiB, rss %.1f MiB, hotplug p50 %s",
		r.N, r.Converge, r.Floor, r.vmWrites(), r.MinWrites, r.Writes.Issued, r.ReconcilesPerVM, r.Heap/(1<<20), r.RSS/(1<<20), r.HotplugP50)
}

// checkMinimum compares the controller's successful writes of VM-related objects with the
// minimum the outcome needs: one create per Auto IPAddress (2N), one networks-spec patch and
// one status patch per VM (N each), and at most one networks-spec patch per launcher pod (a pod
// started after the VM's networks-spec was written needs none). Events and the start-up writes
// of the default policy are not part of it.
func (r result) checkMinimum() []string {
	var out []string
	want := map[string]int{"create ipaddresses": 2 * r.N, "patch virtualmachines": r.N, "patch virtualmachines/status": r.N}
	for k, n := range want {
		if got := r.Writes.OK[k]; got != n {
			out = append(out, fmt.Sprintf("%s: %d writes, minimum %d", k, got, n))
		}
	}
	if got, pods := r.Writes.OK["patch pods"], len(r.Writes.Objects["pods"]); got > r.N || got != pods {
		out = append(out, fmt.Sprintf("patch pods: %d requests on %d pods, want at most one per pod", got, pods))
	}
	return out
}

// vmWrites is the sum of the writes checkMinimum counts.
func (r result) vmWrites() int {
	return r.Writes.OK["create ipaddresses"] + r.Writes.OK["patch virtualmachines"] +
		r.Writes.OK["patch virtualmachines/status"] + r.Writes.OK["patch pods"]
}

// labelled are the names of the VMs the fan-out policy selects.
func labelled(k int) []string {
	out := make([]string, k)
	for i := range k {
		out[i] = ns + "/" + vmName(i)
	}
	sort.Strings(out)
	return out
}

func vmName(i int) string { return fmt.Sprintf("vm-%05d", i) }

// run measures one fresh control plane at n VMs, with hotplug latency over hp VMs.
func run(t testing.TB, n, hp int) result {
	ctx := context.Background()
	h := newHarness(t, controllerQPS, controllerBurst)
	r := result{N: n, MinWrites: 4 * n}
	r.Floor, r.FloorCPU = h.floor(ctx, n)

	h.startStandIns()
	netA, netB := h.networks(ctx)
	h.startController()

	mark := h.auditMark()
	cpu := h.apiServerCPU()
	start := time.Now()
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
	r.ConvergeCPU = h.apiServerCPU() - cpu
	h.settle(3*time.Second, 5*time.Minute)
	r.Writes = h.writes(controllerUser, mark)
	r.StandInWrites = h.writes(standInUser, mark).Succeeded
	r.ReconcilesPerVM = h.reconciles() / float64(n)
	r.Heap, r.LiveHeap, r.RSS = h.memory()
	r.GuestInfoKept = h.guestInfoKept(ctx, ns)

	r.ResyncWrites = h.resync(n)
	r.FanOutTarget, r.FanOutWrittenVMs, r.FanOutWrites, r.FanOutTime = h.fanOut(ctx, n, netA, netB)
	r.HotplugP50, r.HotplugP99, r.HotplugSamples = h.hotplug(ctx, hp, netA)
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
		if !meta.IsStatusConditionTrue(vm.Status.Conditions, vmctrl.ConditionNetworkReady) {
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
	h.startController()
	h.eventually(5*time.Minute, "resync reconciles", func() bool { return h.reconciles() >= float64(n) })
	h.settle(3*time.Second, 5*time.Minute)
	return h.writes(controllerUser, mark).Succeeded
}

// fanOut labels 1% of the VMs, installs a policy making their interfaces L2 only, and returns
// the VMs the controller wrote, its writes and the time until those VMs converged.
func (h *harness) fanOut(ctx context.Context, n int, netA, netB string) (int, []string, int, time.Duration) {
	k := max(1, n/100)
	h.parallel(k, 8, func(i int) error {
		return h.bench.Patch(ctx, &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vmName(i)}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"fanout":"yes"}}}`)))
	})
	h.settle(3*time.Second, 5*time.Minute)
	mark := h.auditMark()
	p, err := policies.Builtin()
	must(h.t, err)
	p.ObjectMeta = metav1.ObjectMeta{Name: "fanout"}
	p.Spec.Priority = 10
	p.Spec.Match.VMSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"fanout": "yes"}}
	p.Spec.Allocation = &v1alpha1.Expression{Expression: "'None'"}
	p.Spec.SkipRules = nil
	start := time.Now()
	must(h.t, h.bench.Create(ctx, p))
	h.eventually(5*time.Minute, "fan-out", func() bool { return h.l2Only(ctx, k, netA, netB) })
	elapsed := time.Since(start)
	h.settle(3*time.Second, 5*time.Minute)
	w := h.writes(controllerUser, mark)
	written := map[string]bool{}
	for _, res := range []string{"virtualmachines", "virtualmachines/status"} {
		for name := range w.Objects[res] {
			written[name] = true
		}
	}
	var names []string
	for name := range written {
		names = append(names, name)
	}
	sort.Strings(names)
	return k, names, w.Succeeded, elapsed
}

// l2Only: the first k VMs attach both networks without addresses and their Auto IPAddresses
// are gone.
func (h *harness) l2Only(ctx context.Context, k int, netA, netB string) bool {
	for i := range k {
		for _, net := range []string{netA, netB} {
			ip := &sdnv1.IPAddress{}
			err := h.view.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.AutoIPAddress(vmName(i), "ClusterNetwork", net)}, ip)
			if err == nil {
				return false
			}
		}
		vm := &vmv1.VirtualMachine{}
		if err := h.view.Get(ctx, types.NamespacedName{Namespace: ns, Name: vmName(i)}, vm); err != nil ||
			!meta.IsStatusConditionTrue(vm.Status.Conditions, vmctrl.ConditionNetworkReady) {
			return false
		}
	}
	return true
}

// hotplug measures, over m running VMs waiting for a missing static IPAddress, the time from
// SDN allocating the IPAddress to the running pod's networks-spec carrying it.
func (h *harness) hotplug(ctx context.Context, m int, net string) (time.Duration, time.Duration, int) {
	must(h.t, h.bench.Create(ctx, build.Namespace(hns)))
	h.parallel(m, 8, func(i int) error {
		return h.bench.Create(ctx, build.VM(hns, fmt.Sprintf("hp-%03d", i), build.OnClusterNetwork(net, fmt.Sprintf("ip-%03d", i))))
	})
	h.eventually(5*time.Minute, "hotplug VMs running", func() bool { return h.runningPods(ctx, hns) == m })
	h.settle(2*time.Second, 5*time.Minute)
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
	h.parallel(m, 8, func(i int) error {
		return h.bench.Create(ctx, build.StaticIPAddress(hns, fmt.Sprintf("ip-%03d", i), "ClusterNetwork", net,
			fmt.Sprintf("10.100.200.%d", i+1)))
	})
	<-done
	var lat []time.Duration
	for name, at := range carried {
		if a, ok := allocated[name]; ok {
			lat = append(lat, max(0, at.Sub(a)))
		}
	}
	if len(lat) == 0 {
		return 0, 0, 0
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], len(lat)
}

// guestInfoKept counts the namespace's VMs whose status.guestOSInfo is the VM-runtime
// stand-in's, read from the API server as unstructured objects (the Go type drops the field).
func (h *harness) guestInfoKept(ctx context.Context, namespace string) int {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(vmv1.GroupVersion.WithKind("VirtualMachineList"))
	must(h.t, h.bench.List(ctx, list, client.InNamespace(namespace)))
	want := fmt.Sprint(vmruntime.GuestOSInfo)
	count := 0
	for _, vm := range list.Items {
		if got, ok, _ := unstructured.NestedMap(vm.Object, "status", vmruntime.StatusGuestOSInfo); ok && fmt.Sprint(got) == want {
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

// floor times the minimal writes the outcome needs (and the kube-apiserver's CPU seconds
// meanwhile), done by a bare client with the
// controller's QPS, burst and concurrency, on VMs and pods created beforehand (untimed) in a
// namespace of their own; the objects are removed afterwards, before the stand-ins and the
// controller start.
func (h *harness) floor(ctx context.Context, n int) (time.Duration, float64) {
	const fns = "floor"
	must(h.t, h.bench.Create(ctx, build.Namespace(fns)))
	h.parallel(n, 16, func(i int) error {
		if err := h.bench.Create(ctx, build.VM(fns, vmName(i), build.OnClusterNetwork("a", ""), build.OnClusterNetwork("b", ""))); err != nil {
			return err
		}
		return h.bench.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: fns, Name: vmName(i)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "stand-in"}}}})
	})
	c := h.client(floorUser, controllerQPS, controllerBurst)
	cpu, start := h.apiServerCPU(), time.Now()
	h.parallel(n, workers, func(i int) error { return floorWrites(ctx, c, fns, vmName(i)) })
	elapsed, cpu := time.Since(start), h.apiServerCPU()-cpu
	h.deleteAll(ctx, fns)
	return elapsed, cpu
}

// deleteAll removes the floor's objects. A deletecollection of 10,000 objects can outlast the
// API server's request timeout, so a timeout is waited out and the deletion asked for again.
func (h *harness) deleteAll(ctx context.Context, namespace string) {
	lists := map[client.Object]client.ObjectList{
		&vmv1.VirtualMachine{}: &vmv1.VirtualMachineList{}, &corev1.Pod{}: &corev1.PodList{}, &sdnv1.IPAddress{}: &sdnv1.IPAddressList{},
	}
	for obj, list := range lists {
		deleteAll := func() {
			err := h.bench.DeleteAllOf(ctx, obj, client.InNamespace(namespace), client.GracePeriodSeconds(0))
			if err != nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
				h.t.Fatal(err)
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
}

// floorWrites are the five writes one converged VM needs: two IPAddresses, the status, the
// VM's networks-spec and the pod's.
func floorWrites(ctx context.Context, c client.Client, namespace, name string) error {
	for _, net := range []string{"a", "b"} {
		ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.AutoIPAddress(name, "ClusterNetwork", net)},
			Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: net}}}
		if err := c.Create(ctx, ip); err != nil {
			return err
		}
	}
	status := []byte(`{"status":{"networks":[{"type":"Main"},{"type":"ClusterNetwork","name":"a","ipAddress":"10.0.0.1"},` +
		`{"type":"ClusterNetwork","name":"b","ipAddress":"10.0.1.1"}],"conditions":[{"type":"NetworkReady","status":"True",` +
		`"reason":"NetworkReady","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Status().Patch(ctx, vm, client.RawPatch(types.MergePatchType, status)); err != nil {
		return err
	}
	spec := []byte(`{"metadata":{"annotations":{"network.deckhouse.io/networks-spec":` +
		strconv.Quote(`[{"type":"ClusterNetwork","name":"a","ifName":"veth_cn00000000","ipAssignmentMode":"DHCP","ipAddressNames":["x"]},`+
			`{"type":"ClusterNetwork","name":"b","ifName":"veth_cn00000001","ipAssignmentMode":"DHCP","ipAddressNames":["y"]}]`) + `}}}`)
	if err := c.Patch(ctx, vm, client.RawPatch(types.MergePatchType, spec)); err != nil {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, spec))
}

var _ = os.Getenv
