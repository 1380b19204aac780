package sdn

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reasons of the Allocated condition, besides sdnv1.ReasonNoFreeIPAddress.
const (
	// ReasonAllocated: the address is reserved (Allocated=True).
	ReasonAllocated = "Allocated"
	// ReasonIPOutOfRange: a Static IPAddress asks for an address outside its pool's ranges.
	ReasonIPOutOfRange = "IPOutOfRange"
	// ReasonIPAlreadyAllocated: a Static IPAddress asks for an address someone else holds.
	ReasonIPAlreadyAllocated = "IPAlreadyAllocated"
	// ReasonInvalidIPAddress: a Static IPAddress has no or an unparsable spec.static.ip.
	ReasonInvalidIPAddress = "InvalidIPAddress"
	// ReasonNetworkNotFound: spec.networkRef names no existing network.
	ReasonNetworkNotFound = "NetworkNotFound"
	// ReasonNoIPAMPool: the network has no pool, or its pool does not exist.
	ReasonNoIPAMPool = "NoIPAMPool"
	// ReasonInvalidPool: the pool's pools[] cannot be parsed.
	ReasonInvalidPool = "InvalidPool"
)

// ReasonReady is the reason of the Ready=True condition the simulator puts on networks.
const ReasonReady = "Ready"

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

// SetupWithManager registers the simulator's controllers (sdn-sim-ipaddress, sdn-sim-pod,
// sdn-sim-network, sdn-sim-clusternetwork) with mgr. The manager's scheme must know core/v1
// and network.deckhouse.io/v1alpha1; its cache may be restricted to launcher pods.
func (s *Simulator) SetupWithManager(mgr ctrl.Manager) error {
	if s.Client == nil {
		s.Client = mgr.GetClient()
	}
	for _, setup := range []func(ctrl.Manager) error{
		s.setupIPAddress, s.setupPod, s.setupNetwork, s.setupClusterNetwork,
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
