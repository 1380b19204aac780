package intern

import (
	"strings"
	"testing"
	"unique"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// same reports whether two strings share their bytes: one copy in memory, not two.
func same(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }

// fresh returns a copy of s in its own allocation, as a decoder hands it out.
func fresh(s string) string { return strings.Clone(s) }

func TestMetaSharesRepeatingStringsAndChangesNoValue(t *testing.T) {
	// Hold the canonical copies for the test's length: strings share them only while a
	// Handle lives, and a garbage collection may run at any point here.
	for _, s := range []string{"team-a", "tier", "web", "Pod", "v1", "VirtualMachine", "NetworkReady", "True"} {
		defer func(h unique.Handle[string]) { _ = h.Value() }(unique.Make(s))
	}
	object := func(name string) (*metav1.TypeMeta, *metav1.ObjectMeta) {
		return &metav1.TypeMeta{APIVersion: fresh("v1"), Kind: fresh("Pod")}, &metav1.ObjectMeta{Name: name,
			Namespace: fresh("team-a"), Labels: map[string]string{fresh("tier"): fresh("web")},
			Annotations:     map[string]string{fresh("tier"): fresh("unique-" + name)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("v1"), Kind: fresh("VirtualMachine"), Name: name}}}
	}
	tmA, a := object("a")
	tmB, b := object("b")
	Meta(tmA, a)
	Meta(tmB, b)
	if a.Labels["tier"] != "web" || a.Annotations["tier"] != "unique-a" || b.Annotations["tier"] != "unique-b" || a.Name != "a" {
		t.Fatalf("interning changed a value: %+v %+v", a, b)
	}
	for what, pair := range map[string][2]string{
		"namespace":   {a.Namespace, b.Namespace},
		"apiVersion":  {tmA.APIVersion, tmB.APIVersion},
		"kind":        {tmA.Kind, tmB.Kind},
		"label value": {a.Labels["tier"], b.Labels["tier"]},
		"owner kind":  {a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s %q is two copies, want one shared", what, pair[0])
		}
	}
	cs := []metav1.Condition{{Type: fresh("NetworkReady"), Status: metav1.ConditionStatus(fresh("True"))}}
	ds := []metav1.Condition{{Type: fresh("NetworkReady"), Status: metav1.ConditionStatus(fresh("True"))}}
	Conditions(cs)
	Conditions(ds)
	if !same(cs[0].Type, ds[0].Type) || !same(string(cs[0].Status), string(ds[0].Status)) {
		t.Errorf("conditions are not shared: %+v %+v", cs, ds)
	}
	if String("") != "" || Labels(nil) != nil {
		t.Errorf("empty values are not kept empty")
	}
}
