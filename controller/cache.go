package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// CacheOptions limits what the manager caches to what vmipam (and the dry-run API, which reads
// the same cache) reads: only launcher pods (label vm.kubevirt.io/name), and every kind trimmed
// by a transform before it is stored — no managedFields and no kubectl last-applied-configuration
// anywhere, VirtualMachines without the spec fields vmipam never reads, Namespaces and pods
// reduced to their metadata (pods keep status.phase). The informers still report every update,
// so an update that changed only trimmed fields arrives as an event whose old and new objects
// are equal: the VM reconciler's watches drop those.
//
// Trimming is safe only because vmipam never writes an object back whole: every write is a
// patch of the fields it owns (merge patches of the networks-spec annotation; a JSON patch of
// its own status entries, or a merge patch of the status difference under the resourceVersion
// read when a list must be built), so what the cache dropped stays on the server
// (test/integration "keeps what it does not read").
func CacheOptions() cache.Options {
	launcher, err := labels.NewRequirement(vmv1.LabelLauncherVMName, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant requirement; cannot fail
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:          {Label: labels.NewSelector().Add(*launcher), Transform: slimLauncherPod},
			&vmv1.VirtualMachine{}: {Transform: slimVM},
			&sdnv1.IPAddress{}:     {Transform: slimIPAddress},
			&corev1.Namespace{}:    {Transform: slimNamespace},
		},
	}
}

// lastApplied is kubectl's copy of the whole manifest of an object applied client-side: often
// the biggest annotation an object has, and of no use to vmipam. Policies do not see it,
// whatever front end builds their input (vm.vmInput drops it too, for manifests given to the
// dry run and ipamctl evaluate).
const lastApplied = corev1.LastAppliedConfigAnnotation

// slimMeta trims an object's metadata in place: no managedFields (the apply bookkeeping of
// every writer, kilobytes per object) and no last-applied-configuration annotation.
func slimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		delete(m.Annotations, lastApplied)
	}
}

// slimLauncherPod is the cache transform of launcher pods: it keeps what vmipam reads of a
// launcher pod — name, namespace, UID, resourceVersion, generation, creation and deletion
// timestamps, the vm.kubevirt.io/name label, the networks-spec annotation, status.phase (the
// fields of vm.onlyOurChange's and vm.changed's pod branches) — and drops the rest: the spec and
// the rest of the status, the other labels and annotations (SDN's networks-status answer, the
// runtime's own), owner references, finalizers and generateName. A real virt-launcher pod's spec
// and status (containers, volumes, environment, container statuses) are several kilobytes
// each and its metadata another kilobyte or more, which 10,000 VMs would hold for nothing.
// vmipam only ever merge-patches pods, so the missing fields are never written back. Policies
// see nothing of pods. The stand-ins of the tests, which read more of a pod (SDN its
// networks-status, the VM runtime its owner and migration annotations), cache pods with a
// transform of their own where they run beside vmipam (test/sim.CacheOptions).
func slimLauncherPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok { // a tombstone of a deleted pod: nothing to trim
		return obj, nil
	}
	m := &pod.ObjectMeta
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace,
		UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: only(m.Labels, vmv1.LabelLauncherVMName), Annotations: only(m.Annotations, sdnv1.AnnotationNetworksSpec)}}
	internMeta(&slim.TypeMeta, &slim.ObjectMeta)
	slim.Status.Phase = intern(pod.Status.Phase)
	return slim, nil
}

// only returns a new map of m's entry under key, or nil when m has none.
func only(m map[string]string, key string) map[string]string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	return map[string]string{key: v}
}

// slimVM is the cache transform of VirtualMachines: it keeps the metadata (policies read every
// label and annotation), spec.runPolicy and spec.networks, and the status vmipam reads or
// writes (phase, networks, conditions — whole, since a merge patch replaces a list whole — and
// observedGeneration); the rest of the spec (CPU, memory, disks, class) is dropped. Fields the
// Go type does not declare are dropped when the object is decoded.
func slimVM(obj any) (any, error) {
	vm, ok := obj.(*vmv1.VirtualMachine)
	if !ok {
		return obj, nil
	}
	slim := &vmv1.VirtualMachine{TypeMeta: vm.TypeMeta, ObjectMeta: vm.ObjectMeta, Status: vm.Status,
		Spec: vmv1.VirtualMachineSpec{RunPolicy: vm.Spec.RunPolicy, Networks: vm.Spec.Networks}}
	slimMeta(&slim.ObjectMeta)
	internVM(slim)
	return slim, nil
}

// slimIPAddress is the cache transform of IPAddresses: of the status it keeps what vmipam reads
// (address, network, phase, the Allocated condition) and drops what SDN's node agent writes
// once the address is in a pod (condition Attached, usedByPods) and the routes; of the metadata
// it keeps the owner references and, of the annotations, only the interface an Auto IPAddress
// serves (vm.AnnotationInterface), and drops the labels. Nothing reads the rest: policies see no
// IPAddress labels or annotations (evaluator.IPAddress), and the VM-UID label vmipam puts on its
// Auto IPAddresses is informational (ownership is the controller reference). The one
// annotation left takes one value per network, so the map holding it is shared by every
// IPAddress of that network (mapTable): 2 maps for the 20,000 IPAddresses of 10,000 VMs on two
// networks instead of 20,000.
func slimIPAddress(obj any) (any, error) {
	if ip, ok := obj.(*sdnv1.IPAddress); ok {
		ip.ManagedFields = nil
		ip.Labels = nil
		ip.Annotations = ipAddressAnnotations(ip.Annotations)
		ip.Status.Routes, ip.Status.UsedByPods = nil, nil
		ip.Status.Conditions = slices.DeleteFunc(ip.Status.Conditions, func(c metav1.Condition) bool {
			return c.Type != sdnv1.ConditionAllocated
		})
		internIPAddress(ip)
	}
	return obj, nil
}

// ipAddressAnnotations returns the shared map of the annotations of an IPAddress that vmipam
// reads (annotations itself is not written: it may already be a shared map), or nil.
func ipAddressAnnotations(annotations map[string]string) map[string]string {
	v, ok := annotations[vm.AnnotationInterface]
	if !ok {
		return nil
	}
	return sharedMaps.share(map[string]string{vm.AnnotationInterface: intern(v)})
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
	slim := &corev1.Namespace{TypeMeta: ns.TypeMeta, ObjectMeta: ns.ObjectMeta}
	slimMeta(&slim.ObjectMeta)
	internMeta(&slim.TypeMeta, &slim.ObjectMeta)
	return slim, nil
}
