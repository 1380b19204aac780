package vm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
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
// pods, then deletions, then status. Deleting after the networks-spec writes means SDN never
// sees a VM or running pod naming an IPAddress that is gone: if a networks-spec write fails,
// nothing is deleted and the retry starts over. Create is the lock: AlreadyExists means a
// stale cache or another replica won the race; the live object is checked for its owner,
// never adopted.
func (r *Reconciler) execute(ctx context.Context, s *scope, p *Plan) error {
	for _, ip := range p.CreateIPAddresses {
		if err := r.create(ctx, s, ip); err != nil {
			return err
		}
	}
	if !p.Deferred {
		if err := r.patchNetworksSpec(ctx, s.vm, p.VMNetworksSpec); err != nil {
			return fmt.Errorf("VirtualMachine: %w", err)
		}
		for i := range s.pods {
			if err := r.patchNetworksSpec(ctx, &s.pods[i], p.Pods[i].NetworksSpecWrite); err != nil {
				return fmt.Errorf("launcher pod %s: %w", s.pods[i].Name, err)
			}
		}
	}
	for _, name := range p.DeleteIPAddresses {
		if err := r.delete(ctx, s, name); err != nil {
			return err
		}
	}
	if p.Deferred {
		return nil
	}
	return r.writeStatus(ctx, s, p)
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
	err := r.Client.Create(ctx, ip.DeepCopy())
	switch {
	case err == nil:
		r.event(s.vm, ip, corev1.EventTypeNormal, "IPAddressCreated", "Create",
			"Created IPAddress %s for %s", ip.Name, ip.Annotations[AnnotationInterface])
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

func (r *Reconciler) delete(ctx context.Context, s *scope, name string) error {
	for i := range s.owned {
		ip := &s.owned[i]
		if ip.Name != name {
			continue
		}
		err := r.Client.Delete(ctx, ip, client.Preconditions{UID: &ip.UID})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete IPAddress %s: %w", ip.Name, err)
		}
		if err == nil {
			r.event(s.vm, ip, corev1.EventTypeNormal, "IPAddressDeleted", "Delete",
				"Deleted IPAddress %s: no interface uses it any more", ip.Name)
		}
	}
	return nil
}

// patchNetworksSpec merge-patches the annotation on obj (a VM or pod) when the plan says so.
func (r *Reconciler) patchNetworksSpec(ctx context.Context, obj client.Object, w NetworksSpecWrite) error {
	if !w.Changed {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{sdnv1.AnnotationNetworksSpec: w.value}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch %s: %w", sdnv1.AnnotationNetworksSpec, err)
	}
	return nil
}
