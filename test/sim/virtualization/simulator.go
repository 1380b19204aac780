package virtualization

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationPower on a VirtualMachine is the power state operations asked for: PowerOn after
// Start, PowerOff after Stop. It decides whether a Manual or AlwaysOnUnlessStoppedManually VM
// runs.
const AnnotationPower = "vc-stand-in.vmipam.test/power"

// Values of AnnotationPower.
const (
	PowerOn  = "on"
	PowerOff = "off"
)

// Annotations on the target pod of a migration.
const (
	// AnnotationMigrationSource names the pod the migration moves away from.
	AnnotationMigrationSource = "vc-stand-in.vmipam.test/migration-source"
	// AnnotationMigrationStarted is when the target pod was created (RFC 3339).
	AnnotationMigrationStarted = "vc-stand-in.vmipam.test/migration-started"
)

// LauncherImage is the image of the launcher pods' single container; no kubelet runs it.
const LauncherImage = "stand-in"

// DefaultMigrationDuration is how long source and target pod of a migration run side by side.
const DefaultMigrationDuration = time.Second

// conflictRetry is how soon a write that lost an optimistic-locking race is retried.
const conflictRetry = 100 * time.Millisecond

// Simulator is the virtualization-controller stand-in. Create it with New; its exported fields may be changed
// before SetupWithManager.
type Simulator struct {
	// Client writes. SetupWithManager sets the manager's client when it is nil.
	Client client.Client
	// Reader reads VMs (as unstructured objects: every field of the real CRD), records, KVVMs
	// and operations. SetupWithManager sets the manager's cache when it is nil, and then reads
	// an object past the cache (the manager's API reader) while the cache may not show the
	// stand-in's own last write of it yet (ownWrites), as a controller keeps expectations of
	// its writes; Client is used when Reader stays nil. Launcher pods are read from Client
	// (the cache, index indexVMName), corrected by the expectations.
	Reader client.Reader
	// Clock times migrations.
	Clock clock.PassiveClock
	// MigrationDuration is how long source and target pod of a migration run side by side; a
	// migration completes in one step when it is 0.
	MigrationDuration time.Duration
	// ReportGuest makes the stand-in also report its guest in the VM status, as VC does:
	// condition ConditionRunning, which changes whenever SDN answers a launcher pod.
	ReportGuest bool
	// ExpectationTTL is how long a pod the stand-in created (deleted) counts as present (gone)
	// while its cache does not show it; DefaultExpectationTTL when 0. A VM with such a pod is
	// reconciled again when it expires.
	ExpectationTTL time.Duration
	// RecheckSDN is how soon a VM whose KVVM waits for SDN is looked at again; SDNRecheck (VC's)
	// when 0. A test that must see SDN's answer wake the VM sets it longer than it waits.
	RecheckSDN time.Duration

	// locks holds one *sync.Mutex per VM (namespace/name): the VM and operation controllers
	// never work on the same VM at once, while different VMs proceed in parallel.
	locks sync.Map
	// expect holds the pods created and deleted that the cache may not show yet.
	expect expectations
	// live reads past the cache while it may not show the stand-in's own last write (own);
	// nil when Reader is not a cache.
	live client.Reader
	// own holds the stand-in's writes whose watch events have not arrived yet.
	own ownWrites
}

// Workers is how many VMs the stand-in works on at once. A reconcile that changes something
// spends nearly all its time waiting on the API server — several writes one after the other
// (at a start the KVVM, the launcher pod, the VM status and the record's status; at a hotplug
// the running pods and the VM status, and in the reconcile SDN's answer brings the KVVM, the
// VM status and the record's status) — so the workers bound how many VMs are in flight: with
// 8, the 100 records a hotplug burst brings waited 1.5 s (median) behind each other in the
// stand-in's queue. A real virtualization controller sizes its workers for bursts the same
// way.
const Workers = 32

// lockVM serializes work on one VM and returns the unlock function.
func (s *Simulator) lockVM(key types.NamespacedName) func() {
	m, _ := s.locks.LoadOrStore(key, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// New returns a Simulator that writes with c, uses the real clock and
// DefaultMigrationDuration. Reader stays nil, for SetupWithManager to fill in.
func New(c client.Client) *Simulator {
	return &Simulator{Client: c, Clock: clock.RealClock{}, MigrationDuration: DefaultMigrationDuration}
}

// SetupWithManager registers vc-stand-in-vm and vc-stand-in-operation with mgr. The manager's
// scheme must know core/v1, virtualization.deckhouse.io/v1alpha2 and
// ipam.virtualization.deckhouse.io/v1alpha1; its cache may be restricted to pods labelled
// vm.kubevirt.io/name. The cluster must serve the stand-in's KVVM CRD (test/crds.StandIn).
func (s *Simulator) SetupWithManager(mgr ctrl.Manager) error {
	if s.Client == nil {
		s.Client = mgr.GetClient()
	}
	if s.Reader == nil {
		// The cache itself, not the manager's client: the client would read the unstructured
		// VMs and KVVMs past it.
		s.Reader, s.live = mgr.GetCache(), mgr.GetAPIReader()
	}
	s.expect.ttl = s.ExpectationTTL
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, indexVMName, vmNameOf); err != nil {
		return fmt.Errorf("setting up the virtualization-controller stand-in: indexing launcher pods: %w", err)
	}
	if err := s.setupVM(mgr); err != nil {
		return fmt.Errorf("setting up the virtualization-controller stand-in: %w", err)
	}
	if err := s.setupOperation(mgr); err != nil {
		return fmt.Errorf("setting up the virtualization-controller stand-in: %w", err)
	}
	return nil
}

// reader is Reader, or Client when Reader is nil.
func (s *Simulator) reader() client.Reader {
	if s.Reader == nil {
		return s.Client
	}
	return s.Reader
}

// now is the simulator's clock reading.
func (s *Simulator) now() time.Time {
	if s.Clock == nil {
		return time.Now()
	}
	return s.Clock.Now()
}

// requeueOnConflict turns a lost optimistic-locking race into a quick retry.
func requeueOnConflict(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, err
}
