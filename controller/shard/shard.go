package shard

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LimitToNamespaces makes opts, the manager's cache options (reads.CacheOptions), those of a shard
// of vmipam (docs/SCALING.md): the namespaced kinds — VMs, IPAddresses, Networks, launcher
// pods — are cached, and so reconciled, only in namespaces, and of the Namespaces only those
// (selected by their kubernetes.io/metadata.name label, which the API server sets on every
// Namespace), so that a label change elsewhere enqueues nothing. The cluster-scoped kinds vmipam
// only reads (ClusterNetworks, ClusterIPAMPolicies) stay cluster-wide. An empty list leaves
// opts cluster-wide. A name that is not a namespace name (a DNS-1123 label) is an error naming
// it, and opts is left as it was.
func LimitToNamespaces(opts *cache.Options, namespaces []string) error {
	if len(namespaces) == 0 {
		return nil
	}
	for _, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %v", ns, errs)
		}
	}
	named, err := labels.NewRequirement(corev1.LabelMetadataName, selection.In, namespaces)
	if err != nil {
		return fmt.Errorf("namespaces %v: %w", namespaces, err)
	}
	opts.DefaultNamespaces = map[string]cache.Config{}
	for _, ns := range namespaces {
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	var key client.Object = &corev1.Namespace{}
	for obj := range opts.ByObject { // keep the options CacheOptions set for Namespaces, if any
		if _, ok := obj.(*corev1.Namespace); ok {
			key = obj
		}
	}
	by := opts.ByObject[key]
	by.Label = labels.NewSelector().Add(*named)
	opts.ByObject[key] = by
	return nil
}
