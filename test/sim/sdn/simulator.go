package sdn

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The stand-in's own reasons. SDN documents two reasons of an IPAddress's Allocated condition,
// sdnv1.ReasonIPAddressAllocated and sdnv1.ReasonNoFreeIPAddress, and none of Attached; these
// are what the stand-in says where it must refuse an IPAddress for another cause, or give
// Attached a reason. Each begins with "StandIn", so that a status showing one is known for the
// stand-in's word, and nothing outside the stand-in and its tests keys on them (doc.go).
const (
	// ReasonIPOutOfRange: a Static IPAddress asks for an address outside its pool's ranges.
	ReasonIPOutOfRange = "StandInIPOutOfRange"
	// ReasonIPInUse: a Static IPAddress asks for an address another IPAddress holds.
	ReasonIPInUse = "StandInIPAddressInUse"
	// ReasonIPLeased: a Static IPAddress asks for an address an orphaned IPAddressLease keeps;
	// it is allocated once the lease expires (or is deleted).
	ReasonIPLeased = "StandInIPAddressLeased"
	// ReasonInvalidIPAddress: a Static IPAddress has no or an unparsable spec.static.ip.
	ReasonInvalidIPAddress = "StandInInvalidIPAddress"
	// ReasonNetworkNotFound: spec.networkRef names no existing network.
	ReasonNetworkNotFound = "StandInNetworkNotFound"
	// ReasonNoIPAMPool: the network has no pool, or its pool does not exist.
	ReasonNoIPAMPool = "StandInNoIPAMPool"
	// ReasonInvalidPool: the pool's pools[] cannot be parsed (or is not IPv4).
	ReasonInvalidPool = "StandInInvalidPool"
	// ReasonConfiguredInPod: Attached=True, a launcher pod has the address configured.
	ReasonConfiguredInPod = "StandInConfiguredInPod"
	// ReasonNotConfiguredInPod: Attached=False, no launcher pod has the address configured any
	// more.
	ReasonNotConfiguredInPod = "StandInNotConfiguredInPod"
)

// AnnotationHoldNotReady, set to "true" on a Network or ClusterNetwork, keeps the simulator from
// marking it Ready; tests remove it to let the network become Ready.
const AnnotationHoldNotReady = "sdn.vmipam.test/hold-not-ready"

// DefaultRetryInterval is how often Pending IPAddresses are retried when nothing else happens.
const DefaultRetryInterval = 2 * time.Second

// conflictRetry is how soon a status write that lost an optimistic-locking race is retried.
const conflictRetry = 100 * time.Millisecond

// Simulator is the SDN stand-in. Create it with New; its exported fields may be changed before
// SetupWithManager.
type Simulator struct {
	// Client reads (through the manager's cache) and writes. SetupWithManager sets the
	// manager's client when it is nil.
	Client client.Client
	// Clock measures leaseTTL.
	Clock clock.PassiveClock
	// RetryInterval is how often Pending IPAddresses are retried; DefaultRetryInterval when 0.
	RetryInterval time.Duration

	mu     sync.Mutex // serializes allocation and guards ledger
	ledger ledger
}

// New returns a Simulator that uses c, the real clock and DefaultRetryInterval.
func New(c client.Client) *Simulator {
	return &Simulator{Client: c, Clock: clock.RealClock{}, RetryInterval: DefaultRetryInterval}
}

// SetupWithManager registers the simulator's controllers (sdn-sim-ipaddress, sdn-sim-attach,
// sdn-sim-lease, sdn-sim-pod, sdn-sim-network, sdn-sim-clusternetwork) with mgr. The manager's
// scheme must know core/v1 and network.deckhouse.io/v1alpha1; its cache may be restricted to
// launcher pods, and must keep their annotations and the IPAddresses' status whole
// (test/sim.CacheOptions).
func (s *Simulator) SetupWithManager(mgr ctrl.Manager) error {
	if s.Client == nil {
		s.Client = mgr.GetClient()
	}
	for _, setup := range []func(ctrl.Manager) error{
		s.setupIPAddress, s.setupAttach, s.setupLease, s.setupPod, s.setupNetwork, s.setupClusterNetwork,
	} {
		if err := setup(mgr); err != nil {
			return fmt.Errorf("setting up the SDN stand-in: %w", err)
		}
	}
	return nil
}

// now is the simulator's clock reading.
func (s *Simulator) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// retryInterval is RetryInterval or its default.
func (s *Simulator) retryInterval() time.Duration {
	if s.RetryInterval <= 0 {
		return DefaultRetryInterval
	}
	return s.RetryInterval
}
