package controller

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// The cache transforms intern the strings that repeat across the tens of thousands of objects a
// large cluster caches — namespaces, kinds and API versions, label and annotation keys, label
// values, network types and names, phases, condition types, statuses, reasons and messages —
// so that the cache holds one copy of each instead of one per object: the JSON decoder
// allocates every string of every object it decodes, and a VM with its two IPAddresses and
// launcher pod repeats the same twenty-odd strings. Names, UIDs, resource versions, addresses
// and the networks-spec annotation's value are unique per object and are left alone (interning
// them would only add the intern table's entry).
//
// Interning uses Go's unique package: unique.Make(s).Value() returns a copy of s shared with
// every other string interned while the canonical copy lives. The cache keeps the string, not
// the Handle, so a canonical copy lives until the next garbage collection finds no Handle; the
// strings of objects decoded in different GC cycles may then be separate copies. That still
// folds the copies of a value down to one per GC cycle in which it was seen, with no table that
// grows with every value ever seen (a plain map would never forget a deleted namespace's name or
// an old condition message).

// intern returns s's shared copy; "" stays "" (it allocates nothing).
func intern[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// internMeta interns the repeating strings of an object's metadata in place: its namespace, its
// label keys and values, its annotation keys (values — the networks-spec JSON, an interface key
// — are mostly unique per object; see internIPAddress for the one that repeats) and its owner
// references' API version and kind. The label and annotation maps are rebuilt (a map's keys
// cannot be replaced in place), so the object no longer holds the maps it came with.
func internMeta(tm *metav1.TypeMeta, m *metav1.ObjectMeta) {
	internRefs(tm, m)
	m.Labels = internedLabels(m.Labels)
	if len(m.Annotations) > 0 {
		annotations := make(map[string]string, len(m.Annotations))
		for k, v := range m.Annotations {
			annotations[intern(k)] = v
		}
		m.Annotations = annotations
	}
}

// internRefs interns an object's kind and API version, namespace and owner references' API
// version and kind in place.
func internRefs(tm *metav1.TypeMeta, m *metav1.ObjectMeta) {
	tm.APIVersion, tm.Kind = intern(tm.APIVersion), intern(tm.Kind)
	m.Namespace = intern(m.Namespace)
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		ref.APIVersion, ref.Kind = intern(ref.APIVersion), intern(ref.Kind)
	}
}

// internedLabels returns a new map of labels' entries, keys and values interned (labels itself
// is not written: it may be a map the table shares); nil when labels is empty.
func internedLabels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[intern(k)] = intern(v)
	}
	return out
}

// internConditions interns a condition list's type, status, reason and message in place:
// thousands of VMs and IPAddresses report the same few conditions with the same words.
func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason, c.Message = intern(c.Type), intern(c.Status), intern(c.Reason), intern(c.Message)
	}
}

// internVM interns a (slim) VirtualMachine's repeating strings in place: metadata, run policy,
// the network type and name of every spec and status entry, phase and conditions; and shares
// its label map with every VM of the same labels (mapTable). Its spec and status networks must
// not share backing arrays with an object someone else holds (slimVM's input is the freshly
// decoded object, which nobody else holds).
func internVM(vm *vmv1.VirtualMachine) {
	internMeta(&vm.TypeMeta, &vm.ObjectMeta)
	vm.Labels = sharedMaps.share(vm.Labels)
	vm.Spec.RunPolicy = intern(vm.Spec.RunPolicy)
	for i := range vm.Spec.Networks {
		n := &vm.Spec.Networks[i]
		n.Type, n.Name = intern(n.Type), intern(n.Name)
	}
	vm.Status.Phase = intern(vm.Status.Phase)
	for i := range vm.Status.Networks {
		n := &vm.Status.Networks[i]
		n.Type, n.Name = intern(n.Type), intern(n.Name)
	}
	internConditions(vm.Status.Conditions)
}

// internIPAddress interns an IPAddress's repeating strings in place: kind, namespace and owner
// references, type, network reference, status network and phase, conditions. Its labels and
// annotations are slimIPAddress's business.
func internIPAddress(ip *sdnv1.IPAddress) {
	internRefs(&ip.TypeMeta, &ip.ObjectMeta)
	ip.Spec.Type = intern(ip.Spec.Type)
	ip.Spec.NetworkRef.Kind, ip.Spec.NetworkRef.Name = intern(ip.Spec.NetworkRef.Kind), intern(ip.Spec.NetworkRef.Name)
	ip.Status.Network, ip.Status.Phase = intern(ip.Status.Network), intern(ip.Status.Phase)
	internConditions(ip.Status.Conditions)
}
