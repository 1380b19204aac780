package metrics_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmipam/vmipam/controller/metrics"
)

var corp = metrics.Network{Kind: "ClusterNetwork", Name: "corp"}

func vmKey(i int) types.NamespacedName {
	return types.NamespacedName{Namespace: "demo", Name: fmt.Sprintf("vm-%d", i)}
}

// TestStateCountsTheLatestDecisionOfEachVM: the gauges count every VM's interfaces as last
// recorded — a re-recorded VM replaces its earlier state instead of adding to it, a forgotten
// VM leaves, and a state nobody is in any more has no series.
func TestStateCountsTheLatestDecisionOfEachVM(t *testing.T) {
	s := metrics.NewState()
	missing := metrics.InterfaceFor("IPAddressNotFound", "Static", corp)
	for i := range 3 {
		s.SetVM(vmKey(i), []metrics.Interface{missing, metrics.InterfaceFor("", "Auto", corp)})
	}
	s.SetVM(vmKey(0), []metrics.Interface{metrics.InterfaceFor("", "Static", corp), metrics.InterfaceFor("", "Auto", corp)})
	s.SetVM(vmKey(0), []metrics.Interface{metrics.InterfaceFor("", "Static", corp), metrics.InterfaceFor("", "Auto", corp)})
	s.ForgetVM(vmKey(2))
	s.ForgetVM(vmKey(7)) // never recorded
	expect(t, s, `
# HELP vmipam_interfaces Additional VM interfaces by state (attached, pending, skipped), skip reason and mode (Auto, Static, None, Unknown), as last decided.
# TYPE vmipam_interfaces gauge
vmipam_interfaces{mode="Auto",reason="",state="attached"} 2
vmipam_interfaces{mode="Static",reason="",state="attached"} 1
vmipam_interfaces{mode="Static",reason="IPAddressNotFound",state="skipped"} 1
`, "vmipam_interfaces")

	s.SetVM(vmKey(1), []metrics.Interface{metrics.InterfaceFor("", "Static", corp)})
	expect(t, s, `
# HELP vmipam_interfaces Additional VM interfaces by state (attached, pending, skipped), skip reason and mode (Auto, Static, None, Unknown), as last decided.
# TYPE vmipam_interfaces gauge
vmipam_interfaces{mode="Auto",reason="",state="attached"} 1
vmipam_interfaces{mode="Static",reason="",state="attached"} 2
`, "vmipam_interfaces")
}

// TestStateNamesTheExhaustedNetworks: interfaces waiting on an exhausted pool are pending,
// and counted per network (a Network with its namespace).
func TestStateNamesTheExhaustedNetworks(t *testing.T) {
	s := metrics.NewState()
	lab := metrics.Network{Kind: "Network", Namespace: "demo", Name: "lab"}
	s.SetVM(vmKey(0), []metrics.Interface{metrics.InterfaceFor("PoolExhausted", "Auto", corp), metrics.InterfaceFor("PoolExhausted", "Auto", lab)})
	s.SetVM(vmKey(1), []metrics.Interface{metrics.InterfaceFor("PoolExhausted", "Auto", corp), metrics.InterfaceFor("PolicyError", "", lab)})
	expect(t, s, `
# HELP vmipam_interfaces Additional VM interfaces by state (attached, pending, skipped), skip reason and mode (Auto, Static, None, Unknown), as last decided.
# TYPE vmipam_interfaces gauge
vmipam_interfaces{mode="Auto",reason="PoolExhausted",state="pending"} 3
vmipam_interfaces{mode="Unknown",reason="PolicyError",state="skipped"} 1
# HELP vmipam_pool_exhausted_interfaces Additional VM interfaces waiting for an address because the network's pool is exhausted (PoolExhausted).
# TYPE vmipam_pool_exhausted_interfaces gauge
vmipam_pool_exhausted_interfaces{network="corp",network_kind="ClusterNetwork",network_namespace=""} 2
vmipam_pool_exhausted_interfaces{network="lab",network_kind="Network",network_namespace="demo"} 1
`, "vmipam_interfaces", "vmipam_pool_exhausted_interfaces")

	s.ForgetVM(vmKey(0))
	expect(t, s, `
# HELP vmipam_pool_exhausted_interfaces Additional VM interfaces waiting for an address because the network's pool is exhausted (PoolExhausted).
# TYPE vmipam_pool_exhausted_interfaces gauge
vmipam_pool_exhausted_interfaces{network="corp",network_kind="ClusterNetwork",network_namespace=""} 1
`, "vmipam_pool_exhausted_interfaces")
}

// TestStateReportsEachPolicy: one ready and one serving-stale series per policy, 1 or 0.
func TestStateReportsEachPolicy(t *testing.T) {
	s := metrics.NewState()
	s.SetPolicy("default", true, false)
	s.SetPolicy("strict", false, true)
	s.SetPolicy("gone", false, false)
	s.ForgetPolicy("gone")
	expect(t, s, `
# HELP vmipam_policy_ready 1 when the ClusterIPAMPolicy's current generation compiled and serves, else 0.
# TYPE vmipam_policy_ready gauge
vmipam_policy_ready{policy="default"} 1
vmipam_policy_ready{policy="strict"} 0
# HELP vmipam_policy_serving_stale 1 when the ClusterIPAMPolicy's current generation does not compile and an older generation serves instead, else 0.
# TYPE vmipam_policy_serving_stale gauge
vmipam_policy_serving_stale{policy="default"} 0
vmipam_policy_serving_stale{policy="strict"} 1
`, "vmipam_policy_ready", "vmipam_policy_serving_stale")
}

func TestInterfaceForSortsReasonsIntoStates(t *testing.T) {
	cases := map[string]string{"": metrics.StateAttached, "IPAddressPending": metrics.StatePending,
		"NetworkNotReady": metrics.StatePending, "IPAddressInUse": metrics.StateSkipped, "MyPolicyReason": metrics.StateSkipped}
	for reason, want := range cases {
		if got := metrics.InterfaceFor(reason, "Auto", corp).State; got != want {
			t.Errorf("InterfaceFor(%q).State = %q, want %q", reason, got, want)
		}
	}
}

func expect(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// The state gauges at scale: 10,000 VMs with two interfaces each (one attached, one spread
// over a dozen skip reasons). Run with
//
//	go test -run '^$' -bench State -benchmem ./controller/metrics/
//
// BenchmarkStateSetVM is the cost added to every reconcile; BenchmarkStateScrape is one scrape
// of the gauges, and reports the memory the state holds per VM.
const scaleVMs = 10_000

var reasons = []string{"", "IPAddressNotFound", "IPAddressPending", "PoolExhausted", "NetworkNotFound", "IPAddressInUse",
	"NoIPAMPool", "PolicyError", "IPAddressNotAllocated", "NetworkNotReady", "IPAddressNetworkMismatch", "IPAddressOwnedByAnotherVM"}

func scaleInterfaces(i int) []metrics.Interface {
	net := metrics.Network{Kind: "Network", Namespace: "demo", Name: fmt.Sprintf("net-%d", i%50)}
	return []metrics.Interface{metrics.InterfaceFor("", "Auto", corp), metrics.InterfaceFor(reasons[i%len(reasons)], "Static", net)}
}

func scaleState() *metrics.State {
	s := metrics.NewState()
	for i := range scaleVMs {
		s.SetVM(vmKey(i), scaleInterfaces(i))
	}
	return s
}

func BenchmarkStateSetVM(b *testing.B) {
	s := scaleState()
	keys := make([]types.NamespacedName, scaleVMs)
	ifaces := make([][]metrics.Interface, scaleVMs)
	for i := range keys {
		keys[i], ifaces[i] = vmKey(i), scaleInterfaces(i+1) // a changed state: other reasons
	}
	b.ResetTimer()
	for i := range b.N {
		s.SetVM(keys[i%scaleVMs], ifaces[(i+b.N)%scaleVMs])
	}
}

func BenchmarkStateScrape(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := scaleState()
	runtime.GC()
	runtime.ReadMemStats(&after)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	b.ResetTimer()
	for range b.N {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/scaleVMs, "heap-B/VM")
	runtime.KeepAlive(s)
}
