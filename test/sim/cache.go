package sim

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vmipam/vmipam/controller/reads"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// CacheOptions are vmipam's cache options (reads.CacheOptions) for a manager the
// stand-ins run in, alone or beside vmipam, with the default cache (not reads.NewCache):
// launcher pods are typed, finished ones too (the virtualization controller sees every
// launcher pod of a VM), and keep their whole metadata, not only what vmipam reads, and
// IPAddresses their whole status. SDN reads a pod's networks-status to
// answer only what changed, and an IPAddress's status to write only what changed (Attached,
// usedByPods, routes); the virtualization-controller stand-in reads a pod's controller
// reference, migration and decided annotations; vmipam's own transforms drop them. vmipam
// running on this cache reads a superset of what it reads in production.
func CacheOptions() cache.Options {
	opts := reads.CacheOptions()
	for obj, by := range opts.ByObject {
		switch obj.(type) {
		case *corev1.Pod:
			by.Field, by.Transform = nil, launcherPodMetadata
		case *sdnv1.IPAddress:
			by.Transform = cache.TransformStripManagedFields()
		case *v1alpha1.VirtualMachineIPAM:
			// The default transform serves (vmipam's only interns); and the SDN stand-in runs
			// where vmipam's CRDs are not installed, where an entry would fail the cache.
			delete(opts.ByObject, obj)
			continue
		default:
			continue
		}
		opts.ByObject[obj] = by
	}
	return opts
}

// launcherPodMetadata keeps a launcher pod's metadata, without managedFields, and its phase.
func launcherPodMetadata(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok { // a tombstone
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	slim.ManagedFields = nil
	slim.Status.Phase = pod.Status.Phase
	return slim, nil
}
