package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// Labels, annotations and reasons on objects vmipam creates.
const (
	// LabelVMUID marks an Auto IPAddress with the UID of its VM (virtualization platform's
	// label). It is informational: ownership is decided by the controller ownerReference only.
	LabelVMUID = "virtualization.deckhouse.io/virtual-machine-uid"
	// AnnotationInterface records which interface ("<Type>/<network>") an Auto IPAddress
	// serves, since its name may be shortened with a hash.
	AnnotationInterface = "ipam.virtualization.deckhouse.io/interface"
	// ReasonIPAddressConflict: an object already has the interface's Auto IPAddress name but
	// is not controlled by this VM; vmipam never adopts it.
	ReasonIPAddressConflict = "IPAddressConflict"
)

// execute carries out a Plan: Auto IPAddresses first, then networks-spec on the VM and the
// pods (side by side), then status (beside the reads that guard the deletions), then
// deletions. Status follows what was done: it is
// written once the networks-spec writes it describes succeeded, whether or not a deletion
// fails later.
// Deleting last means SDN never sees a VM or running pod naming an IPAddress that is gone: if
// a networks-spec write fails, nothing is deleted and the retry starts over. A deferred plan
// only creates. Create is the lock: AlreadyExists means a stale cache or another replica won
// the race; the live object is checked for its owner, never adopted.
func (r *Reconciler) execute(ctx context.Context, s *scope, p *Plan) error {
	for _, ip := range p.CreateIPAddresses {
		if err := r.create(ctx, s, ip); err != nil {
			return err
		}
	}
	if p.Deferred {
		return nil
	}
	// The handoff starts before the writes, since a contender's cache may show them before
	// they return, and again once the VM's write returned (patchNetworksSpecs), to time it
	// from the write; a pod's write failing later does not undo it, and the retry, with the
	// VM written already, would not start it (atk21).
	r.letGo(s, p)
	written, err := r.patchNetworksSpecs(ctx, s, p)
	if err != nil {
		return err
	}
	// The status write and the reads that guard the deletions go side by side: neither
	// changes what the other reads (status is not networks-spec), and both follow the
	// networks-spec writes. The deletions wait for both, so a failed status write still
	// deletes nothing and status never names an address already gone. Only a reconcile with a
	// release due reads: the one that first finds an IPAddress unwanted only starts its
	// ReleaseGrace, so a policy edit's reconcile is the writes alone (issue #16).
	due := r.releaseDue(s, p.DeleteIPAddresses)
	var inUse map[string]bool
	var g errgroup.Group
	g.Go(func() error { return r.writeStatus(ctx, s, written, p) })
	if len(due) > 0 {
		g.Go(func() (err error) {
			inUse, err = r.namedLive(ctx, s.vm)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return r.deleteUnwanted(ctx, s, r.stillUnnamed(s, due, inUse))
}

// letGo starts the handoff of every IPAddress the VM's networks-spec, as the plan just wrote it,
// no longer carries: the next launcher pod may still be made from the VM as it was before
// (handoffs). The pods' networks-spec does not count: a new pod copies the VM's.
func (r *Reconciler) letGo(s *scope, p *Plan) {
	if !p.VMNetworksSpec.Changed {
		return
	}
	kept := sets.New[string]()
	for _, e := range p.VMNetworksSpec.Entries {
		kept.Insert(e.IPAddressNames...)
	}
	dropped := sets.New(index.CarriedNames(s.vm.Annotations[sdnv1.AnnotationNetworksSpec])...).Difference(kept)
	if dropped.Len() > 0 {
		r.handoffs.letGo(s.vm.Namespace, s.vm.Name, dropped.UnsortedList(), r.now(), ReleaseGrace)
	}
}

// releaseDue returns the plan's candidates (unwanted and, as the cache shows, unnamed) that
// have been candidates for ReleaseGrace; s.releaseAfter says when the next of the others is
// due, unless a handoff is due sooner. A plan without candidates ends the VM's releases.
func (r *Reconciler) releaseDue(s *scope, names []string) []*sdnv1.IPAddress {
	key := client.ObjectKeyFromObject(s.vm)
	if len(names) == 0 {
		r.releases.forget(key)
		return nil
	}
	byUID := map[types.UID]*sdnv1.IPAddress{}
	var candidates []types.UID
	for i := range s.owned {
		ip := &s.owned[i]
		if slices.Contains(names, ip.Name) && ours(ip, s.vm) {
			byUID[ip.UID] = ip
			candidates = append(candidates, ip.UID)
		}
	}
	due, wait := r.releases.due(key, candidates, r.now(), ReleaseGrace)
	s.releaseAfter = soonest(s.releaseAfter, wait)
	out := make([]*sdnv1.IPAddress, 0, len(due))
	for _, uid := range due {
		out = append(out, byUID[uid])
	}
	return out
}

// stillUnnamed returns the due IPAddresses that no writer-visible state names (not in inUse,
// namedLive's answer). One that is named — the cache lagged, or a launcher pod made from an
// older read of the VM appeared — starts its ReleaseGrace over.
func (r *Reconciler) stillUnnamed(s *scope, due []*sdnv1.IPAddress, inUse map[string]bool) []*sdnv1.IPAddress {
	var out []*sdnv1.IPAddress
	for _, ip := range due {
		if !inUse[ip.Name] {
			out = append(out, ip)
			continue
		}
		r.releases.startOver(client.ObjectKeyFromObject(s.vm), ip.UID, r.now())
		s.releaseAfter = soonest(s.releaseAfter, ReleaseGrace)
	}
	return out
}

// RBAC for execute: Auto IPAddresses are created and deleted (get re-reads one after
// AlreadyExists); their controller reference to the VM sets blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin allows only to whoever may update the
// VM's finalizers; networks-spec is merge-patched on VMs and launcher pods; events (the
// events.k8s.io recorder) say what was created or deleted and why an interface is skipped.
// +kubebuilder:rbac:groups=network.deckhouse.io,resources=ipaddresses,verbs=create;delete
// +kubebuilder:rbac:groups=virtualization.deckhouse.io,resources=virtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=virtualization.deckhouse.io,resources=virtualmachines,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// errForeignIPAddress is returned when Create finds an object of our name with another owner
// that the cache has not shown yet; the retry observes it and reports IPAddressConflict.
var errForeignIPAddress = errors.New("IPAddress exists with another owner")

func (r *Reconciler) create(ctx context.Context, s *scope, ip *sdnv1.IPAddress) error {
	created := ip.DeepCopy()
	var err error
	s.news = r.issue(created, func() {
		if err = r.Client.Create(ctx, created); err == nil {
			r.expectations().expectCreated(created)
		}
	}) || s.news
	switch {
	case err == nil:
		r.event(s.vm, ip, corev1.EventTypeNormal, "IPAddressCreated", "Create",
			"Created IPAddress %s for %s", ip.Name, InterfaceLabel(ip.Annotations[AnnotationInterface]))
		return nil
	case apierrors.IsAlreadyExists(err):
		live := &sdnv1.IPAddress{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ip), live); err != nil {
			return fmt.Errorf("get IPAddress %s after AlreadyExists: %w", ip.Name, err)
		}
		if ref := index.ControllerVM(live); ref == nil || ref.UID != s.vm.UID {
			return fmt.Errorf("create IPAddress %s: %w", ip.Name, errForeignIPAddress)
		}
		return nil
	default:
		return fmt.Errorf("create IPAddress %s: %w", ip.Name, err)
	}
}

// deleteUnwanted deletes ips, the plan's candidates that have been unwanted for ReleaseGrace
// (releaseDue) and that no writer-visible state names. The plan decided from the cache, which
// may lag; so the VM and its launcher pods were read once more from the API server
// (namedLive), and a candidate that the VM's spec or networks-spec, or the networks-spec of
// any pod that has not finished (a terminating one too), still names was kept for a later
// reconcile (stillUnnamed). Each delete carries the
// UID and resourceVersion seen as preconditions, so that a concurrent edit of the IPAddress
// wins over the delete. The deletes are independent of each other and go side by side, as the
// two reads do: one after the other they made a policy edit's reconcile six round trips long
// (docs/BENCHMARKS.md, "policy change"); each error is returned, and the retry deletes what is
// left.
func (r *Reconciler) deleteUnwanted(ctx context.Context, s *scope, ips []*sdnv1.IPAddress) error {
	var g errgroup.Group
	for _, ip := range ips {
		g.Go(func() error { return r.delete(ctx, s, ip) })
	}
	return g.Wait()
}

// namedLive returns the IPAddress names that the live VM (spec and networks-spec) and the
// networks-spec of its live launcher pods that have not finished name.
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
		for _, name := range index.CarriedNames(live.Annotations[sdnv1.AnnotationNetworksSpec]) {
			out[name] = true
		}
	}
	for i := range pods.Items {
		if usesAddresses(&pods.Items[i]) {
			for _, name := range index.CarriedNames(pods.Items[i].Annotations[sdnv1.AnnotationNetworksSpec]) {
				out[name] = true
			}
		}
	}
	return out, nil
}

func (r *Reconciler) delete(ctx context.Context, s *scope, ip *sdnv1.IPAddress) error {
	err := r.Client.Delete(ctx, ip, client.Preconditions{UID: &ip.UID, ResourceVersion: &ip.ResourceVersion})
	if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete IPAddress %s: %w", ip.Name, err)
	}
	r.expectations().observedIPAddress(ip) // gone or changed: never read it from the expectations
	if err == nil {
		r.event(s.vm, ip, corev1.EventTypeNormal, "IPAddressDeleted", "Delete",
			"Deleted IPAddress %s: no interface uses it any more", ip.Name)
	}
	return nil
}

// patchNetworksSpecs writes the plan's networks-spec on the VM and on each running pod side
// by side, and returns the VM as the API server answered (nil when it was not written). The
// writes are independent: the VM's is what the next boot gets, a pod's what its guest gets
// now, and neither is read back before the other. One after the other, they made a hotplug's
// reconcile two round trips long, and the hotplugs of a burst queued behind each other's
// (docs/SCALING.md). When one fails the others may have landed; status and deletions wait
// for all of them, and the retry writes only what still differs.
func (r *Reconciler) patchNetworksSpecs(ctx context.Context, s *scope, p *Plan) (*vmv1.VirtualMachine, error) {
	var g errgroup.Group
	var liveVM client.Object
	news := make([]bool, 1+len(s.pods)) // one per write: each goroutine sets its own
	g.Go(func() (err error) {
		if liveVM, news[0], err = r.patchNetworksSpec(ctx, s.vm, p.VMNetworksSpec); err != nil {
			return fmt.Errorf("VirtualMachine: %w", err)
		}
		r.letGo(s, p)
		return nil
	})
	for i := range s.pods {
		g.Go(func() (err error) {
			if _, news[1+i], err = r.patchNetworksSpec(ctx, &s.pods[i], p.Pods[i].NetworksSpecWrite); err != nil {
				return fmt.Errorf("launcher pod %s: %w", s.pods[i].Name, err)
			}
			return nil
		})
	}
	err := g.Wait()
	s.news = s.news || slices.Contains(news, true)
	if err != nil {
		return nil, err
	}
	if liveVM == nil {
		return nil, nil
	}
	return liveVM.(*vmv1.VirtualMachine), nil
}

// patchNetworksSpec merge-patches the annotation on a copy of obj (a VM or pod) when the plan
// says so, and returns the copy as the API server answered, or nil when nothing was written,
// and whether an event that arrived during the write showed news (issue). obj itself stays
// the object observed.
func (r *Reconciler) patchNetworksSpec(ctx context.Context, obj client.Object, w NetworksSpecWrite) (client.Object, bool, error) {
	if !w.Changed {
		return nil, false, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{sdnv1.AnnotationNetworksSpec: w.value}}})
	if err != nil {
		return nil, false, err
	}
	written := obj.DeepCopyObject().(client.Object)
	news := r.issue(written, func() {
		if err = r.Client.Patch(ctx, written, client.RawPatch(types.MergePatchType, patch)); err == nil {
			r.expectations().expectPatched(obj, written, onlyOurChange(obj, written))
			r.expectations().wroteNetworksSpec(written)
		}
	})
	if err != nil {
		return nil, news, fmt.Errorf("patch %s: %w", sdnv1.AnnotationNetworksSpec, err)
	}
	return written, news, nil
}

// issue runs write, a write of obj that records its expectations when it succeeds, as an
// in-flight write (ownWrites.begin/done), and says whether an event of obj that arrived
// meanwhile turned out to show news: the caller then sets scope.news, and the reconcile
// brings its VM back.
func (r *Reconciler) issue(obj client.Object, write func()) bool {
	k := r.expectations().begin(obj)
	write()
	return r.expectations().done(k)
}
