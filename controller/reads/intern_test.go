package reads

import (
	"encoding/json"
	"fmt"
	"testing"
	"unique"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// decode returns a freshly decoded object, as the informers' decoder hands one to a
// transform: every string its own allocation.
func decode[T any](t *testing.T, manifest string) *T {
	t.Helper()
	obj := new(T)
	if err := json.Unmarshal([]byte(manifest), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// same reports whether two strings share their bytes: one copy in memory, not two.
func same(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }

const vmManifest = `{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine",
 "metadata":{"namespace":"team-a","name":"%s","uid":"%s","labels":{"tier":"web"},
  "annotations":{"network.deckhouse.io/networks-spec":"[]"}},
 "spec":{"runPolicy":"AlwaysOn","networks":[{"type":"Main"},{"type":"ClusterNetwork","name":"corp"}]},
 "status":{"phase":"Running","networks":[{"type":"ClusterNetwork","name":"corp","ipAddress":"10.0.0.%d"}],
  "conditions":[{"type":"NetworkReady","status":"True","reason":"AllAttached","message":"every interface attached","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`

func TestTransformsShareRepeatingStringsAndChangeNoValue(t *testing.T) {
	// Hold the canonical copies for the test's length: the cache's strings share them only
	// while a Handle lives (internal/intern), and a garbage collection may run at any point here.
	for _, s := range []string{"team-a", "tier", "web", "corp", "NetworkReady", "every interface attached", "Pod", "v1"} {
		defer func(h unique.Handle[string]) { _ = h.Value() }(unique.Make(s))
	}
	var vms [2]*vmv1.VirtualMachine
	for i, name := range []string{"web-1", "web-2"} {
		manifest := fmtManifest(vmManifest, name, "uid-"+name, i+1)
		in := decode[vmv1.VirtualMachine](t, manifest)
		out, err := slimVM(in)
		if err != nil {
			t.Fatal(err)
		}
		vms[i] = out.(*vmv1.VirtualMachine)
		want := decode[vmv1.VirtualMachine](t, manifest)
		want.Spec.RunPolicy, want.Status.Conditions = "", nil // what slimVM drops
		want.Status.Networks[0].IPAddress = ""
		if !equality.Semantic.DeepEqual(vms[i], want) {
			t.Errorf("interning changed a value:\n got %+v\nwant %+v", vms[i], want)
		}
	}
	a, b := vms[0], vms[1]
	for what, pair := range map[string][2]string{
		"namespace":         {a.Namespace, b.Namespace},
		"apiVersion":        {a.APIVersion, b.APIVersion},
		"label value":       {a.Labels["tier"], b.Labels["tier"]},
		"spec network name": {a.Spec.Networks[1].Name, b.Spec.Networks[1].Name},
		"status network":    {a.Status.Networks[0].Name, b.Spec.Networks[1].Name},
		"phase":             {string(a.Status.Phase), string(b.Status.Phase)},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s %q is two copies, want one shared", what, pair[0])
		}
	}
	for k := range a.Labels {
		for k2 := range b.Labels {
			if !same(k, k2) {
				t.Errorf("label key %q is two copies, want one shared", k)
			}
		}
	}

	const podManifest = `{"apiVersion":"v1","kind":"Pod","metadata":{"namespace":"team-a","name":"%s","labels":{"vm.kubevirt.io/name":"web"},
	 "ownerReferences":[{"apiVersion":"virtualization.deckhouse.io/v1alpha2","kind":"VirtualMachine","name":"web","uid":"u"}]},"status":{"phase":"Running"}}`
	p1, _ := slimLauncherPod(decode[corev1.Pod](t, fmtManifest(podManifest, "p1")))
	p2, _ := slimLauncherPod(decode[corev1.Pod](t, fmtManifest(podManifest, "p2")))
	pa, pb := p1.(*corev1.Pod), p2.(*corev1.Pod)
	if !same(pa.Namespace, a.Namespace) || !same(pa.Labels["vm.kubevirt.io/name"], pb.Labels["vm.kubevirt.io/name"]) ||
		!same(string(pa.Status.Phase), string(pb.Status.Phase)) || pa.Name == pb.Name {
		t.Errorf("launcher pods %s and %s do not share their namespace, VM label and phase with each other and the VM", pa.Name, pb.Name)
	}

	const ipManifest = `{"metadata":{"namespace":"team-a","name":"%s","annotations":{"ipam.virtualization.deckhouse.io/interface":"ClusterNetwork/corp"}},
	 "spec":{"type":"Auto","networkRef":{"kind":"ClusterNetwork","name":"corp"}},"status":{"address":"10.0.0.1","network":"10.0.0.0/24","phase":"Allocated"}}`
	i1, _ := slimIPAddress(decode[sdnv1.IPAddress](t, fmtManifest(ipManifest, "ip1")))
	i2, _ := slimIPAddress(decode[sdnv1.IPAddress](t, fmtManifest(ipManifest, "ip2")))
	ia, ib := i1.(*sdnv1.IPAddress), i2.(*sdnv1.IPAddress)
	const iface = "ipam.virtualization.deckhouse.io/interface"
	if !same(ia.Annotations[iface], ib.Annotations[iface]) || !same(ia.Spec.NetworkRef.Name, a.Spec.Networks[1].Name) ||
		!same(ia.Status.Network, ib.Status.Network) || ia.Status.Address != "10.0.0.1" {
		t.Errorf("IPAddresses %s and %s do not share their interface annotation, network name and subnet", ia.Name, ib.Name)
	}
}

// fmtManifest fills a manifest's %s and %d verbs.
func fmtManifest(manifest string, args ...any) string { return fmt.Sprintf(manifest, args...) }
