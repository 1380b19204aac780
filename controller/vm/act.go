package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/plan"
	"github.com/vmipam/vmipam/controller/reads"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// RBAC for execute: Auto IPAddresses are created and deleted (get re-reads one after
// AlreadyExists, or after a delete lost a resourceVersion race); the record is created and
// patched (get re-reads it after a refused patch);
// the controller references of both to the VM set blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin allows only to whoever may update the
// VM's finalizers; events (the events.k8s.io recorder) say what was deleted and why an
// interface is skipped. vmipam writes no VirtualMachine, no VM status and no pod.
// +kubebuilder:rbac:groups=network.deckhouse.io,resources=ipaddresses,verbs=create;delete
// +kubebuilder:rbac:groups=ipam.virtualization.deckhouse.io,resources=virtualmachineipams,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=virtualization.deckhouse.io,resources=virtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// execute carries out a Plan: the Auto IPAddresses first, then the record, then the releases
// that are due. It reports whether an event of an object it wrote arrived during the write and
// changed what vmipam reads (the VM is then reconciled again at once).
//
// The record goes after the creates, so that a consumer never provisions an IPAddress that does
// not exist yet, and before the deletes, so that it never names one already deleted: when the
// record write fails nothing is deleted and the retry starts over. A deferred plan only
// creates. Create is the lock: AlreadyExists means a stale cache or another replica won the
// race; the live object is checked for its owner, never adopted.
func (r *Reconciler) execute(ctx context.Context, vm *vmv1.VirtualMachine, p *plan.Plan) (bool, error) {
	missed := false
	for _, ip := range p.CreateIPAddresses {
		n, err := r.create(ctx, vm, ip)
		if missed = missed || n; err != nil {
			return missed, err
		}
	}
	if p.Deferred {
		return missed, nil
	}
	if p.RecordChanged {
		n, err := r.writeRecord(ctx, p)
		if missed = missed || n; err != nil {
			return missed, err
		}
		for _, skip := range p.Announce() {
			r.event(vm, skip.Related, corev1.EventTypeWarning, skip.Reason, "Skip", "%s", skip.Note)
		}
	}
	if len(p.Releases) == 0 {
		return missed, nil
	}
	named, err := r.namedLive(ctx, vm)
	if err != nil {
		return missed, err
	}
	return missed, r.deleteUnnamed(ctx, vm, p.Releases, named)
}

// errForeignIPAddress is returned when Create finds an object of our name with another owner
// that the cache has not shown yet; the retry observes it and reports IPAddressConflict.
var errForeignIPAddress = errors.New("IPAddress exists with another owner")

// create creates an Auto IPAddress of the plan and reports whether an event that arrived
// during the write changed what vmipam reads (an enqueue the event did not make).
func (r *Reconciler) create(ctx context.Context, vm *vmv1.VirtualMachine, ip *sdnv1.IPAddress) (bool, error) {
	created := ip.DeepCopy()
	var err error
	missed := r.issue(created, func() {
		if err = r.Client.Create(ctx, created); err == nil {
			r.expectations().expectCreated(created)
		}
	})
	switch {
	case err == nil:
		// Its grace runs from now (plan.createdLeft); an API server running ahead dated it
		// later, and the plans that look at it again must time the grace from here.
		r.firstSeenClock().Created(created, r.now())
		// No event: the IPAddress records its own creation (creationTimestamp, the VM as its
		// controller, the interface annotation), and one Normal event per address was two
		// fifths of vmipam's writes at 10,000 VMs and a quarter of its memory, client-go's events
		// broadcaster keeping each event 6–12 minutes (docs/OPERATING.md, "Events").
		return missed, nil
	case apierrors.IsAlreadyExists(err):
		live := &sdnv1.IPAddress{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ip), live); err != nil {
			return missed, fmt.Errorf("get IPAddress %s after AlreadyExists: %w", ip.Name, err)
		}
		if ref := index.ControllerVM(live); ref == nil || ref.UID != vm.UID {
			return missed, fmt.Errorf("create IPAddress %s: %w", ip.Name, errForeignIPAddress)
		}
		// Ours, from a create whose answer was lost: its grace is timed as for a fresh create.
		r.firstSeenClock().Created(live, r.now())
		return missed, nil
	default:
		return missed, fmt.Errorf("create IPAddress %s: %w", ip.Name, err)
	}
}

// writeRecord creates the VM's record, or patches the observed one to the plan's (recordPatch:
// a concurrent change of its spec or owner references — another replica, someone else's edit
// — fails the patch as a conflict, and the retry decides from what it wrote). The record's
// status is the consumer's and is never written.
func (r *Reconciler) writeRecord(ctx context.Context, p *plan.Plan) (bool, error) {
	observed := p.Observed()
	written := p.Record.DeepCopy()
	written.Status = v1alpha1.VirtualMachineIPAMStatus{}
	var err error
	missed := r.issue(written, func() {
		if observed == nil {
			err = r.Client.Create(ctx, written)
		} else {
			err = r.patchRecord(ctx, observed, written)
		}
		if err == nil {
			r.expectations().wroteRecord(observed, written)
		}
	})
	if err != nil {
		return missed, fmt.Errorf("write VirtualMachineIPAM: %w", err)
	}
	return missed, nil
}

// patchRecord patches the record observed to written with recordPatch. A failed precondition
// is returned as a Conflict: the API server answers a failed test, like any error of applying a
// JSON patch, with a bare 422 (k8s.io/apiserver's patch handler), so a 422 is told apart from a
// record the CRD refuses by reading the live record: changed since observed, it was the test.
func (r *Reconciler) patchRecord(ctx context.Context, observed, written *v1alpha1.VirtualMachineIPAM) error {
	patch, err := recordPatch(observed, written)
	if err != nil {
		return err
	}
	err = r.Client.Patch(ctx, written, patch)
	if !apierrors.IsInvalid(err) {
		return err
	}
	live := &v1alpha1.VirtualMachineIPAM{}
	if getErr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(written), live); getErr == nil && intentOf(observed).shows(live) {
		return err // the record is as observed: the patch itself was refused
	}
	return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("virtualmachineipams").GroupResource(), written.Name,
		fmt.Errorf("the record changed since it was read: %w", err))
}

// recordPatch is the JSON patch (RFC 6902) that turns the record observed into written: it
// replaces the spec, and the owner references when they changed, under tests of the observed
// UID (a record deleted and made again under the name is another), metadata.generation (which
// only a change of the spec moves: the consumer's status writes and metadata edits leave it)
// and, when they are replaced, the observed owner references (none observed is not tested: a
// record vmipam wrote always has its VM's, so an owner added by someone else to a record
// stripped of all of them would be replaced). It is not conditional on the resourceVersion, as a merge patch under optimistic
// locking is: the virtualization controller writes the record's status after each spec write,
// so a spec write that followed it closely, from a cache that had not seen the status write
// yet, was rejected as a conflict for a field it does not touch (docs/BENCHMARKS.md round 11).
func recordPatch(observed, written *v1alpha1.VirtualMachineIPAM) (client.Patch, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{{"test", "/metadata/uid", observed.UID}, {"test", "/metadata/generation", observed.Generation}}
	if !equality.Semantic.DeepEqual(observed.OwnerReferences, written.OwnerReferences) {
		if observed.OwnerReferences != nil {
			ops = append(ops, op{"test", "/metadata/ownerReferences", observed.OwnerReferences})
		}
		ops = append(ops, op{"add", "/metadata/ownerReferences", written.OwnerReferences})
	}
	ops = append(ops, op{"replace", "/spec", written.Spec})
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the record's patch: %w", err)
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// namedLive returns the IPAddress names that the live VM's spec and the networks-spec of its
// live launcher pods that have not finished name, read past the cache.
func (r *Reconciler) namedLive(ctx context.Context, vm *vmv1.VirtualMachine) (map[string]bool, error) {
	live := &vmv1.VirtualMachine{}
	var pods corev1.PodList
	gone := false
	var g errgroup.Group
	g.Go(func() error {
		switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(vm), live); {
		case apierrors.IsNotFound(err): // gone: the garbage collector takes its IPAddresses
			gone = true
		case err != nil:
			return fmt.Errorf("read VirtualMachine before deleting IPAddresses: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := r.APIReader.List(ctx, &pods, client.InNamespace(vm.Namespace),
			client.MatchingLabels{vmv1.LabelLauncherVMName: vm.Name}); err != nil {
			return fmt.Errorf("list launcher pods before deleting IPAddresses: %w", err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	if !gone {
		for _, n := range live.Spec.Networks {
			out[n.IPAddressName] = true
		}
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			for _, name := range index.CarriedNames(p.Annotations[sdnv1.AnnotationNetworksSpec]) {
				out[name] = true
			}
		}
	}
	return out, nil
}

// deleteUnnamed deletes the released IPAddresses that nothing names in the live read (named):
// the plan decided from the cache, which may lag. Each delete carries the UID and
// resourceVersion seen as preconditions, so that a concurrent edit of the IPAddress wins over
// the delete (SDN's status writes do not count as one: sdnStatusOnly). The deletes are
// independent of each other and go side by side; each error is returned, and the retry deletes
// what is left. One still named stays until it is not: the change of what names it brings the
// VM back.
func (r *Reconciler) deleteUnnamed(ctx context.Context, vm *vmv1.VirtualMachine, ips []*sdnv1.IPAddress, named map[string]bool) error {
	var g errgroup.Group
	for _, ip := range ips {
		if !named[ip.Name] {
			g.Go(func() error { return r.delete(ctx, vm, ip) })
		}
	}
	return g.Wait()
}

func (r *Reconciler) delete(ctx context.Context, vm *vmv1.VirtualMachine, ip *sdnv1.IPAddress) error {
	err := r.Client.Delete(ctx, ip, client.Preconditions{UID: &ip.UID, ResourceVersion: &ip.ResourceVersion})
	if apierrors.IsConflict(err) {
		switch live, same, unused := r.sdnStatusOnly(ctx, ip); {
		case same && unused:
			err = r.Client.Delete(ctx, live, client.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion})
		case same:
			// Only SDN's status changed, and it shows a pod using the address. If a pod names it,
			// the retry sees the pod and keeps it; if SDN's status only lags (the pod let go
			// already), SDN's next status write changes nothing vmipam reads (reads.Changed) and
			// would wake nobody: the conflict brings the VM back (conflictRetry).
			return fmt.Errorf("delete IPAddress %s: SDN's status shows a pod using it: %w", ip.Name, err)
		}
	}
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete IPAddress %s: %w", ip.Name, err)
	}
	r.expectations().creationObserved(ip) // gone or changed: never read it from the expectations
	if err == nil {
		r.event(vm, ip, corev1.EventTypeNormal, "IPAddressDeleted", "Delete",
			"Deleted IPAddress %s: no interface uses it any more", ip.Name)
	}
	return nil
}

// sdnStatusOnly reads ip live after its delete lost a resourceVersion race and says whether
// only its status changed since ip was read (same) and whether that status says no pod uses the
// address (unused: no usedByPods, Attached not True) — SDN's node agent writes Attached False as
// the pods that carried the address go, which is what precedes a release. Both: the delete is
// made again at once under the live resourceVersion. Same but used (a pod made from an older
// read that SDN has just configured, or SDN's status lagging behind a pod that let go): the
// delete ends and the VM is retried (delete). A change of anything vmipam decided from (what
// reads.IPAddress keeps of the metadata: owner references, the interface annotation, deletion;
// and the spec) wins over the delete; its event brings the VM back.
func (r *Reconciler) sdnStatusOnly(ctx context.Context, ip *sdnv1.IPAddress) (live *sdnv1.IPAddress, same, unused bool) {
	live = &sdnv1.IPAddress{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ip), live); err != nil {
		return nil, false, false
	}
	// Compared as the cache keeps them (reads.IPAddress): what vmipam reads of an IPAddress.
	was, now := reads.IPAddress(ip), reads.IPAddress(live)
	same = now.UID == was.UID && now.Generation == was.Generation && now.DeletionTimestamp == nil &&
		equality.Semantic.DeepEqual(now.OwnerReferences, was.OwnerReferences) &&
		equality.Semantic.DeepEqual(now.Annotations, was.Annotations) && equality.Semantic.DeepEqual(now.Spec, was.Spec)
	unused = len(live.Status.UsedByPods) == 0 && !apimeta.IsStatusConditionTrue(live.Status.Conditions, sdnv1.ConditionAttached)
	return live, same, unused
}

// issue runs write, a write of obj that records its expectations when it succeeds, as an
// in-flight write (writeExpectations.writeStarted/writeFinished), and says whether an event of obj that arrived
// meanwhile turned out to change what vmipam reads: the reconcile then brings its VM back.
func (r *Reconciler) issue(obj client.Object, write func()) bool {
	k := r.expectations().writeStarted(obj)
	write()
	return r.expectations().writeFinished(k)
}
