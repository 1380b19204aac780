package intern

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Which strings to intern: those that repeat across objects — namespaces, kinds and API
// versions, label and annotation keys, label values, network types and names, phases,
// condition types, statuses, reasons and messages. Names, UIDs, resource versions, addresses
// and JSON annotation values are unique per object and are best left alone (interning them
// would only add the table's entry).
//
// unique.Make(s).Value() returns a copy of s shared with every other string interned while
// the canonical copy lives. A cache keeps the string, not the Handle, so a canonical copy lives
// until the next garbage collection finds no Handle; strings decoded in different GC cycles may
// then be separate copies. That still folds the copies of a value down to one per GC cycle in
// which it was seen, with no table that grows with every value ever seen (a plain map would
// never forget a deleted namespace's name or an old condition message).

// String returns s's shared copy; "" stays "" (it allocates nothing).
func String[S ~string](s S) S {
	if s == "" {
		return s
	}
	return S(unique.Make(string(s)).Value())
}

// Meta interns the repeating strings of an object's metadata in place: its kind, API version
// and namespace, its label keys and values, its annotation keys (values are mostly unique per
// object) and its owner references' API version and kind. The label and annotation maps are
// rebuilt (a map's keys cannot be replaced in place), so the object no longer holds the maps
// it came with.
func Meta(tm *metav1.TypeMeta, m *metav1.ObjectMeta) {
	Refs(tm, m)
	m.Labels = Labels(m.Labels)
	if len(m.Annotations) > 0 {
		annotations := make(map[string]string, len(m.Annotations))
		for k, v := range m.Annotations {
			annotations[String(k)] = v
		}
		m.Annotations = annotations
	}
}

// Refs interns an object's kind and API version, namespace and owner references' API version
// and kind in place.
func Refs(tm *metav1.TypeMeta, m *metav1.ObjectMeta) {
	tm.APIVersion, tm.Kind = String(tm.APIVersion), String(tm.Kind)
	m.Namespace = String(m.Namespace)
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		ref.APIVersion, ref.Kind = String(ref.APIVersion), String(ref.Kind)
	}
}

// Labels returns a new map of labels' entries, keys and values interned (labels itself is not
// written: it may be a map a table shares); nil when labels is empty.
func Labels(labels map[string]string) map[string]string {
	if len(labels) == 0 {
		return nil
	}
	out := make(map[string]string, len(labels))
	for k, v := range labels {
		out[String(k)] = String(v)
	}
	return out
}

// Conditions interns a condition list's type, status, reason and message in place: thousands
// of objects report the same few conditions with the same words.
func Conditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason, c.Message = String(c.Type), String(c.Status), String(c.Reason), String(c.Message)
	}
}
