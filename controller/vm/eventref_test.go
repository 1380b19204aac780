package vm

import (
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// An event names the same objects it named when the recorder built the references itself,
// and two events share their references' API version strings.
func TestEventReferenceIsTheRecordersWithSharedStrings(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := vmv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := sdnv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", ResourceVersion: "42"}
	typed := &vmv1.VirtualMachine{TypeMeta: metav1.TypeMeta{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachine"}, ObjectMeta: meta}
	for _, obj := range []runtime.Object{&vmv1.VirtualMachine{ObjectMeta: meta}, typed, &sdnv1.IPAddress{ObjectMeta: meta}} {
		want, err := reference.GetReference(scheme, obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := reference.GetReference(scheme, eventReference(obj))
		if err != nil || !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("reference of %T = %+v, %v; want the recorder's %+v", obj, got, err, want)
		}
		again := eventReference(obj).(*corev1.ObjectReference)
		if unsafe.StringData(again.APIVersion) != unsafe.StringData(got.APIVersion) {
			t.Errorf("two references of %T hold two copies of their API version", obj)
		}
	}
	if got := eventReference(nil); got != nil {
		t.Errorf("eventReference(nil) = %v, want nil (an event without a related object)", got)
	}
	other := &corev1.Pod{}
	if got := eventReference(other); got != runtime.Object(other) {
		t.Errorf("an object of another kind is passed through, got %v", got)
	}
}
