package metrics

import (
	"sync"
	"unique"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Interface states (the state label of vmipam_interfaces). They follow the VM's NetworkReady
// condition: an interface with a NetworkReady item is pending or skipped.
const (
	// StateAttached: the interface is attached and has no NetworkReady item.
	StateAttached = "attached"
	// StatePending: the interface waits for SDN — an address to be allocated, a pool to
	// free up, a network to become ready (see PendingReasons).
	StatePending = "pending"
	// StateSkipped: the interface is not attached for any other reason; someone has to act.
	StateSkipped = "skipped"
)

// ModeUnknown is the mode label of an interface whose allocation could not be decided (a
// policy failed to evaluate).
const ModeUnknown = "Unknown"

// PendingReasons are the skip reasons of an interface that waits for SDN rather than for a
// person: state "pending".
var PendingReasons = map[string]bool{
	"IPAddressPending":      true,
	"IPAddressNotAllocated": true,
	"PoolExhausted":         true,
	"NetworkNotReady":       true,
}

// reasonPoolExhausted is the skip reason counted in vmipam_pool_exhausted_interfaces.
const reasonPoolExhausted = "PoolExhausted"

// Interface is one additional interface as the last reconcile of its VM decided it.
type Interface struct {
	// State is StateAttached, StatePending or StateSkipped.
	State string
	// Reason is the skip reason; "" when attached.
	Reason string
	// Mode is the decided allocation: Auto, Static, None, or ModeUnknown.
	Mode string
	// Network is the interface's network.
	Network Network
}

// Network names an SDN network.
type Network struct {
	// Kind is Network or ClusterNetwork.
	Kind string
	// Namespace is the namespace of a Network; "" for a ClusterNetwork.
	Namespace string
	// Name is the network's name.
	Name string
}

// InterfaceFor returns the Interface of one decision: reason is the skip reason ("" when
// attached), mode the decided allocation ("" when unknown).
func InterfaceFor(reason, mode string, network Network) Interface {
	state := StateAttached
	switch {
	case reason == "":
	case PendingReasons[reason]:
		state = StatePending
	default:
		state = StateSkipped
	}
	if mode == "" {
		mode = ModeUnknown
	}
	return Interface{State: state, Reason: reason, Mode: mode, Network: network}
}

// interfaceKey is one series of vmipam_interfaces.
type interfaceKey struct{ state, reason, mode string }

// policyState is the series of one policy in vmipam_policy_ready and
// vmipam_policy_serving_stale.
type policyState struct{ ready, stale bool }

// State holds what the reconcilers last decided — every VM's interfaces and every policy's
// compile outcome — and the counts the state gauges expose, kept up to date on every change,
// so that a scrape costs the number of series, not the number of VMs. It is a
// prometheus.Collector. Safe for concurrent use.
type State struct {
	mu sync.Mutex
	// vms holds each VM's interfaces as handles of interned Interface values: a handle is one
	// pointer, where an Interface is six strings, and thousands of VMs share the same few
	// (state, reason, mode, network) combinations. Only the counts' bookkeeping reads it.
	vms        map[types.NamespacedName][]unique.Handle[Interface]
	interfaces map[interfaceKey]int
	exhausted  map[Network]int
	policies   map[string]policyState
}

// NewState returns an empty State.
func NewState() *State {
	return &State{vms: map[types.NamespacedName][]unique.Handle[Interface]{}, interfaces: map[interfaceKey]int{},
		exhausted: map[Network]int{}, policies: map[string]policyState{}}
}

// SetVM records the interfaces of a VM, replacing what was recorded for it before.
func (s *State) SetVM(vm types.NamespacedName, ifaces []Interface) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.vms[vm] {
		s.count(h.Value(), -1)
	}
	if len(ifaces) == 0 {
		delete(s.vms, vm)
		return
	}
	handles := make([]unique.Handle[Interface], len(ifaces))
	for i, it := range ifaces {
		s.count(it, +1)
		handles[i] = unique.Make(it)
	}
	s.vms[vm] = handles
}

// ForgetVM removes a VM that is gone or being deleted.
func (s *State) ForgetVM(vm types.NamespacedName) { s.SetVM(vm, nil) }

// count adds delta to the counts of interface it, dropping counts that reach zero so that a
// state nobody is in any more has no series.
func (s *State) count(it Interface, delta int) {
	k := interfaceKey{it.State, it.Reason, it.Mode}
	if s.interfaces[k] += delta; s.interfaces[k] == 0 {
		delete(s.interfaces, k)
	}
	if it.Reason == reasonPoolExhausted {
		if s.exhausted[it.Network] += delta; s.exhausted[it.Network] == 0 {
			delete(s.exhausted, it.Network)
		}
	}
}

// SetPolicy records a policy's compile outcome: ready when its current generation compiled
// and serves, stale when an older generation serves instead.
func (s *State) SetPolicy(name string, ready, stale bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies[name] = policyState{ready: ready, stale: stale}
}

// ForgetPolicy removes a policy that is gone.
func (s *State) ForgetPolicy(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.policies, name)
}

var (
	interfacesDesc = prometheus.NewDesc("vmipam_interfaces",
		"Additional VM interfaces by state (attached, pending, skipped), skip reason and mode (Auto, Static, None, Unknown), as last decided.",
		[]string{"state", "reason", "mode"}, nil)
	policyReadyDesc = prometheus.NewDesc("vmipam_policy_ready",
		"1 when the ClusterIPAMPolicy's current generation compiled and serves, else 0.",
		[]string{"policy"}, nil)
	policyStaleDesc = prometheus.NewDesc("vmipam_policy_serving_stale",
		"1 when the ClusterIPAMPolicy's current generation does not compile and an older generation serves instead, else 0.",
		[]string{"policy"}, nil)
	exhaustedDesc = prometheus.NewDesc("vmipam_pool_exhausted_interfaces",
		"Additional VM interfaces waiting for an address because the network's pool is exhausted (PoolExhausted).",
		[]string{"network_kind", "network_namespace", "network"}, nil)
)

// Describe implements prometheus.Collector.
func (s *State) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{interfacesDesc, policyReadyDesc, policyStaleDesc, exhaustedDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: one sample per series.
func (s *State) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, n := range s.interfaces {
		ch <- prometheus.MustNewConstMetric(interfacesDesc, prometheus.GaugeValue, float64(n), k.state, k.reason, k.mode)
	}
	for n, c := range s.exhausted {
		ch <- prometheus.MustNewConstMetric(exhaustedDesc, prometheus.GaugeValue, float64(c), n.Kind, n.Namespace, n.Name)
	}
	for name, p := range s.policies {
		ch <- prometheus.MustNewConstMetric(policyReadyDesc, prometheus.GaugeValue, gauge(p.ready), name)
		ch <- prometheus.MustNewConstMetric(policyStaleDesc, prometheus.GaugeValue, gauge(p.stale), name)
	}
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var _ prometheus.Collector = (*State)(nil)
