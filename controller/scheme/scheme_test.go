package scheme_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vmipam/vmipam/controller/scheme"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func TestNewKnowsEveryKindVMIPAMReadsOrWrites(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Namespace"),
		corev1.SchemeGroupVersion.WithKind("Event"),
		v1alpha1.GroupVersion.WithKind("ClusterIPAMPolicy"),
		sdnv1.GroupVersion.WithKind("IPAddress"), sdnv1.GroupVersion.WithKind("Network"),
		sdnv1.GroupVersion.WithKind("ClusterNetwork"), sdnv1.GroupVersion.WithKind("IPAddressPool"),
		sdnv1.GroupVersion.WithKind("ClusterIPAddressPool"),
		vmv1.GroupVersion.WithKind("VirtualMachine"), vmv1.GroupVersion.WithKind("VirtualMachineOperation"),
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
}
