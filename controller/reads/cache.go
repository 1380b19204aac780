package reads

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/internal/intern"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// CacheOptions limits what the manager caches to what vmipam (and the dry-run API, which reads
// the same cache) reads: only launcher pods (label vm.kubevirt.io/name) that have not finished
// (unfinished), and every kind trimmed by a transform before it is stored — no managedFields anywhere, and VMs, pods, Namespaces and
// IPAddresses reduced to their projections (VM, LauncherPod, Namespace, IPAddressAnnotations),
// their repeating strings and small maps interned, and decision records kept whole with their
// repeating strings interned (slimRecord). The informers still report every update, so
// an update that changed only trimmed fields arrives as an event whose old and new objects are
// equal: the watches drop those (Changed).
func CacheOptions() cache.Options {
	launcher, err := labels.NewRequirement(vmv1.LabelLauncherVMName, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant requirement; cannot fail
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                  {Label: labels.NewSelector().Add(*launcher), Field: unfinished(), Transform: slimLauncherPod},
			&vmv1.VirtualMachine{}:         {Transform: slimVM},
			&sdnv1.IPAddress{}:             {Transform: slimIPAddress},
			&corev1.Namespace{}:            {Transform: slimNamespace},
			&v1alpha1.VirtualMachineIPAM{}: {Transform: slimRecord},
		},
	}
}

// sharedMaps is the map table of the cache transforms (one per process: every informer's
// objects share it). A real virt-launcher pod's spec and status, a VM's CPU, memory and disks
// are kilobytes each, which 10,000 VMs would hold for nothing; the maps and strings that are
// left repeat across objects, and the table and intern.String fold them.
var sharedMaps = intern.NewMaps()

// SharedMapsIntact returns an error naming a label or annotation map the cache transforms
// share between objects that has been written to since it was shared — a reader that wrote
// into a cached object instead of a copy —, or nil. Tests call it after running the
// controller; a map shared and then forgotten by the table is not checked.
func SharedMapsIntact() error {
	if m := sharedMaps.Intact(); m != nil {
		return fmt.Errorf("a label or annotation map shared by cached objects was written to; it now holds %v", maps.Clone(m))
	}
	return nil
}

// unfinished returns the field selector of the launcher pods vmipam caches: those whose phase
// is neither Succeeded nor Failed (the pod fields the API server selects on include
// status.phase). A finished pod's guest is gone and holds no address (plan's observer counts
// only unfinished pods), and with the phase in the selector NewCache keeps no pod's status at
// all. A pod that finishes leaves the watch as a deleted one does.
func unfinished() fields.Selector {
	return fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
}

// slimLauncherPod is the cache transform of launcher pods, typed (LauncherPod) or metadata
// only (LauncherPodMetadata, NewCache), interned. vmipam never writes pods; policies see
// nothing of pods. The stand-ins of the tests, which read more of a pod, cache pods with a
// transform of their own where they run beside vmipam (test/sim.CacheOptions).
func slimLauncherPod(obj any) (any, error) {
	switch pod := obj.(type) {
	case *corev1.Pod:
		slim := LauncherPod(pod)
		intern.Meta(&slim.TypeMeta, &slim.ObjectMeta)
		slim.Status.Phase = intern.String(slim.Status.Phase)
		return slim, nil
	case *metav1.PartialObjectMetadata:
		slim := LauncherPodMetadata(pod)
		intern.Meta(&slim.TypeMeta, &slim.ObjectMeta)
		return slim, nil
	}
	return obj, nil // a tombstone of a deleted pod: nothing to trim
}

// slimVM is the cache transform of VirtualMachines (VM, interned, its label map shared with
// every VM of the same labels). Fields the Go type does not declare are dropped when the
// object is decoded.
func slimVM(obj any) (any, error) {
	vm, ok := obj.(*vmv1.VirtualMachine)
	if !ok {
		return obj, nil
	}
	slim := VM(vm)
	internVM(slim)
	return slim, nil
}

// slimIPAddress is the cache transform of IPAddresses (IPAddress, interned). Nothing reads the rest: policies see no IPAddress labels
// or annotations (evaluator.IPAddress), and the VM-UID label vmipam puts on its Auto
// IPAddresses is informational (ownership is the controller reference). The one annotation
// left takes one value per network, so the map holding it is shared by every IPAddress of that
// network: 2 maps for the 20,000 IPAddresses of 10,000 VMs on two networks instead of 20,000.
func slimIPAddress(obj any) (any, error) {
	ip, ok := obj.(*sdnv1.IPAddress)
	if !ok {
		return obj, nil
	}
	slim := IPAddress(ip)
	slim.Annotations = sharedMaps.Share(internValues(slim.Annotations))
	internIPAddress(slim)
	return slim, nil
}

// slimNamespace is the cache transform of Namespaces: vmipam reads their name and labels only,
// so they are kept as metadata. This is what a metadata-only watch (builder.OnlyMetadata) would
// hold, without making every reader — the observer, the policy fan-out, the dry-run overlay —
// ask for metav1.PartialObjectMetadata: one typed Get of a Namespace would otherwise start a
// second, full informer beside the metadata one.
func slimNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	slim := Namespace(ns)
	intern.Meta(&slim.TypeMeta, &slim.ObjectMeta)
	return slim, nil
}

// slimRecord is the cache transform of decision records: no managedFields, and the strings
// that repeat across records interned — network types and names, allocations, reasons and
// messages, the policies that decided, the summary and the consumer's conditions. Every field
// stays: vmipam reads its records whole (a stopped VM's applied state, releases, what the
// consumer observed). Its label map is the record's own (nothing shares it).
func slimRecord(obj any) (any, error) {
	rec, ok := obj.(*v1alpha1.VirtualMachineIPAM)
	if !ok {
		return obj, nil
	}
	rec.ManagedFields = nil
	intern.Meta(&rec.TypeMeta, &rec.ObjectMeta)
	for i := range rec.Spec.Interfaces {
		d := &rec.Spec.Interfaces[i]
		d.Type, d.Name, d.Allocation = intern.String(d.Type), intern.String(d.Name), intern.String(d.Allocation)
		d.Reason, d.Message = intern.String(d.Reason), intern.String(d.Message)
		if p := d.DecidedBy; p != nil {
			p.Allocation, p.Hotplug, p.Skip = intern.String(p.Allocation), intern.String(p.Hotplug), intern.String(p.Skip)
		}
	}
	rec.Spec.Summary.Attached, rec.Spec.Summary.Reason = intern.String(rec.Spec.Summary.Attached), intern.String(rec.Spec.Summary.Reason)
	intern.Conditions(rec.Status.Conditions)
	return rec, nil
}

// internValues interns m's values in place (m is a map the caller built) and returns it.
func internValues(m map[string]string) map[string]string {
	for k, v := range m {
		m[k] = intern.String(v)
	}
	return m
}

// internVM interns a (slim) VirtualMachine's repeating strings in place: metadata, run policy,
// the network type and name of every spec and status entry, phase and conditions; and shares
// its label map with every VM of the same labels. Its spec and status networks must not share
// backing arrays with an object someone else holds (slimVM's input is the freshly decoded
// object, which nobody else holds).
func internVM(vm *vmv1.VirtualMachine) {
	intern.Meta(&vm.TypeMeta, &vm.ObjectMeta)
	vm.Labels = sharedMaps.Share(vm.Labels)
	vm.Spec.RunPolicy = intern.String(vm.Spec.RunPolicy)
	for i := range vm.Spec.Networks {
		n := &vm.Spec.Networks[i]
		n.Type, n.Name = intern.String(n.Type), intern.String(n.Name)
	}
	vm.Status.Phase = intern.String(vm.Status.Phase)
	for i := range vm.Status.Networks {
		n := &vm.Status.Networks[i]
		n.Type, n.Name = intern.String(n.Type), intern.String(n.Name)
	}
	intern.Conditions(vm.Status.Conditions)
}

// internIPAddress interns an IPAddress's repeating strings in place: kind, namespace and owner
// references, type, network reference, status network and phase, conditions. Its labels and
// annotations are slimIPAddress's business.
func internIPAddress(ip *sdnv1.IPAddress) {
	intern.Refs(&ip.TypeMeta, &ip.ObjectMeta)
	ip.Spec.Type = intern.String(ip.Spec.Type)
	ip.Spec.NetworkRef.Kind, ip.Spec.NetworkRef.Name = intern.String(ip.Spec.NetworkRef.Kind), intern.String(ip.Spec.NetworkRef.Name)
	ip.Status.Network, ip.Status.Phase = intern.String(ip.Status.Network), intern.String(ip.Status.Phase)
	intern.Conditions(ip.Status.Conditions)
}
