package sim

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/vmipam/vmipam/controller/reads"
)

// CacheOptions are vmipam's cache options (reads.CacheOptions) for a manager the
// stand-ins run in, alone or beside vmipam: launcher pods keep their whole metadata, not only
// what vmipam reads. SDN reads a pod's networks-status to answer only what changed, the VM
// virtualization-controller stand-in its controller reference, migration and decided
// annotations; vmipam's own transform drops
// them. vmipam running on this cache reads a superset of what it reads in production.
func CacheOptions() cache.Options {
	opts := reads.CacheOptions()
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*corev1.Pod); ok {
			by.Transform = launcherPodMetadata
			opts.ByObject[obj] = by
		}
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
