package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the dry-run API.
const GroupName = "dryrun.ipam.virtualization.deckhouse.io"

// The resource and kind this group serves.
const (
	// Resource is the plural resource name of Evaluation.
	Resource = "evaluations"
	// Kind is the kind of an Evaluation.
	Kind = "Evaluation"
)

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// SchemeBuilder registers the types of this package (and the meta/v1 options the generic
// API server decodes: CreateOptions and the like) with a scheme.
var SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &Evaluation{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
