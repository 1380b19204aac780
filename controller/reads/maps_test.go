package reads

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// sameMap reports whether a and b are one map in memory, not two of equal content.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// The transforms share the label maps of VMs and the annotation maps of IPAddresses, never
// write into a map they did not build (client-go may transform an object twice), and a copy
// taken by a reader (controller-runtime's Get and List deep-copy) is its own map.
func TestTransformsShareMapsReadOnly(t *testing.T) {
	labels := map[string]string{"tier": "web", "fleet": "batch-7"}
	vm := func(name string) *vmv1.VirtualMachine {
		out, _ := slimVM(&vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{"tier": "web", "fleet": "batch-7"}, Annotations: map[string]string{"team": name}}})
		return out.(*vmv1.VirtualMachine)
	}
	a, b := vm("a"), vm("b")
	if !sameMap(a.Labels, b.Labels) || !reflect.DeepEqual(a.Labels, labels) {
		t.Errorf("VMs of equal labels hold two label maps, want one shared: %v, %v", a.Labels, b.Labels)
	}
	if sameMap(a.Annotations, b.Annotations) || a.Annotations["team"] != "a" || b.Annotations["team"] != "b" {
		t.Errorf("VM annotations: %v, %v", a.Annotations, b.Annotations)
	}
	again, _ := slimVM(a)
	if !sameMap(again.(*vmv1.VirtualMachine).Labels, a.Labels) {
		t.Errorf("a VM transformed twice no longer shares its labels")
	}

	const iface = "ipam.virtualization.deckhouse.io/interface"
	ip := func(name, network string) *sdnv1.IPAddress {
		out, _ := slimIPAddress(&sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Annotations: map[string]string{iface: "ClusterNetwork/" + network, "sdn.example/allocated-by": "node-" + name}}})
		return out.(*sdnv1.IPAddress)
	}
	x, y, z := ip("x", "corp"), ip("y", "corp"), ip("z", "storage")
	if !sameMap(x.Annotations, y.Annotations) || sameMap(x.Annotations, z.Annotations) {
		t.Errorf("IPAddress annotation maps are not shared per interface: %v %v %v", x.Annotations, y.Annotations, z.Annotations)
	}
	if !reflect.DeepEqual(x.Annotations, map[string]string{iface: "ClusterNetwork/corp"}) {
		t.Errorf("IPAddress annotations = %v, want the interface annotation only", x.Annotations)
	}
	twice, _ := slimIPAddress(x)
	if !sameMap(twice.(*sdnv1.IPAddress).Annotations, y.Annotations) {
		t.Errorf("an IPAddress transformed twice no longer shares its annotations")
	}
	if none, _ := slimIPAddress(&sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "static",
		Annotations: map[string]string{"note": "x"}}}); none.(*sdnv1.IPAddress).Annotations != nil {
		t.Errorf("a static IPAddress keeps annotations vmipam does not read: %v", none.(*sdnv1.IPAddress).Annotations)
	}

	copied := a.DeepCopy() // what the cache's Get hands a reconcile
	copied.Labels["tier"] = "db"
	copied.Annotations["team"] = "z"
	if b.Labels["tier"] != "web" || a.Annotations["team"] != "a" {
		t.Errorf("writing a reader's copy changed the cache's shared map: %v", b.Labels)
	}
	if err := SharedMapsIntact(); err != nil {
		t.Error(err)
	}
}
