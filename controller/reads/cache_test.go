package reads

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func TestSlimLauncherPodKeepsWhatVMIPAMReads(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-web-abcde", GenerateName: "virt-launcher-web-",
			UID: "uid-pod", ResourceVersion: "7", Generation: 2, CreationTimestamp: now,
			Labels: map[string]string{"vm.kubevirt.io/name": "web", "kubevirt.internal.virtualization.deckhouse.io": "web"},
			Annotations: map[string]string{"network.deckhouse.io/networks-spec": `[{"type":"Network","name":"corp"}]`,
				"network.deckhouse.io/networks-status":    `[{"type":"Network","name":"corp","ifName":"veth_n1"}]`,
				"kubectl.kubernetes.io/default-container": "compute"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "VirtualMachine", Name: "web", UID: "uid-web"}},
			Finalizers:        []string{"virtualization.deckhouse.io/protection"},
			DeletionTimestamp: &now,
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "virt-controller"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher",
			Env: []corev1.EnvVar{{Name: "BIG", Value: "…"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "compute", Ready: true}}},
	}
	out, err := slimLauncherPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Pod)
	want := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-web-abcde", UID: "uid-pod",
		ResourceVersion: "7", Generation: 2, CreationTimestamp: now, DeletionTimestamp: &now,
		Labels:      map[string]string{"vm.kubevirt.io/name": "web"},
		Annotations: map[string]string{"network.deckhouse.io/networks-spec": `[{"type":"Network","name":"corp"}]`}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if !equality.Semantic.DeepEqual(slim, want) {
		t.Errorf("slim pod is not what vmipam reads (LauncherPod):\n got %+v\nwant %+v", slim, want)
	}
	noSpec, _ := slimLauncherPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"app": "x"}}})
	if p := noSpec.(*corev1.Pod); p.Labels != nil || p.Annotations != nil {
		t.Errorf("a pod without the VM label or networks-spec keeps maps: %v %v", p.Labels, p.Annotations)
	}

	out, err = slimLauncherPod(metadataOf(pod))
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := &metav1.PartialObjectMetadata{ObjectMeta: want.ObjectMeta}
	wantMeta.SetGroupVersionKind(podKind)
	if got := out.(*metav1.PartialObjectMetadata); !equality.Semantic.DeepEqual(got, wantMeta) {
		t.Errorf("slim pod metadata is not what vmipam reads (LauncherPodMetadata):\n got %+v\nwant %+v", got, wantMeta)
	}

	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: pod}
	if got, err := slimLauncherPod(tombstone); err != nil || got != any(tombstone) {
		t.Errorf("a tombstone is passed through unchanged, got %v, %v", got, err)
	}
}

// TestNewCacheSelectsUnfinishedPods: whatever options NewCache is given, its pods are the
// unfinished ones — a pod entry's own field selector is kept beside it, and options without a
// pod entry get one — and the caller's map is not changed.
func TestNewCacheSelectsUnfinishedPods(t *testing.T) {
	const unfinished = "status.phase!=Succeeded,status.phase!=Failed"
	for name, tt := range map[string]struct {
		in   map[client.Object]crcache.ByObject
		want string
	}{
		"no options":             {nil, unfinished},
		"no pod entry":           {map[client.Object]crcache.ByObject{&corev1.Namespace{}: {}}, unfinished},
		"a pod entry without":    {map[client.Object]crcache.ByObject{&corev1.Pod{}: {Transform: slimLauncherPod}}, unfinished},
		"CacheOptions' own":      {CacheOptions().ByObject, unfinished},
		"another field selector": {map[client.Object]crcache.ByObject{&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", "n1")}}, "spec.nodeName=n1," + unfinished},
	} {
		t.Run(name, func(t *testing.T) {
			in, before := tt.in, len(tt.in)
			var pods []crcache.ByObject
			for obj, by := range withUnfinishedPods(in) {
				if _, ok := obj.(*corev1.Pod); ok {
					pods = append(pods, by)
				}
			}
			if len(pods) != 1 {
				t.Fatalf("%d pod entries, want 1", len(pods))
			}
			if got := pods[0].Field.String(); got != tt.want {
				t.Errorf("pod field selector %q, want %q", got, tt.want)
			}
			if len(in) != before {
				t.Errorf("the caller's options were changed")
			}
		})
	}
}

func TestSlimVMKeepsWhatVMIPAMReadsAndWrites(t *testing.T) {
	id := int64(2)
	vm := &vmv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web", ResourceVersion: "9", Generation: 3,
			Labels: map[string]string{"tier": "web"},
			Annotations: map[string]string{"network.deckhouse.io/networks-spec": "[]", "team": "a",
				corev1.LastAppliedConfigAnnotation: `{"a":"whole manifest"}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: vmv1.VirtualMachineSpec{VirtualMachineClassName: "generic", CPU: &apiextensionsv1.JSON{Raw: []byte(`{"cores":4}`)},
			Memory: &apiextensionsv1.JSON{Raw: []byte(`{"size":"8Gi"}`)}, BlockDeviceRefs: &apiextensionsv1.JSON{Raw: []byte(`[]`)},
			RunPolicy: vmv1.RunPolicyManual, Networks: []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeMain}, {ID: &id, Type: vmv1.NetworkTypeNetwork, Name: "corp"}}},
		Status: vmv1.VirtualMachineStatus{Phase: vmv1.PhaseRunning, ObservedGeneration: 3,
			Networks:   []vmv1.NetworksStatus{{Type: vmv1.NetworkTypeNetwork, Name: "corp", MACAddress: "aa", IPAddress: "10.0.0.1"}},
			Conditions: []metav1.Condition{{Type: "NetworkReady", Status: metav1.ConditionTrue}}},
	}
	want := vm.DeepCopy()
	out, err := slimVM(vm)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*vmv1.VirtualMachine)
	if slim.Spec.CPU != nil || slim.Spec.Memory != nil || slim.Spec.BlockDeviceRefs != nil || slim.Spec.VirtualMachineClassName != "" ||
		len(slim.ManagedFields) != 0 || slim.Annotations[corev1.LastAppliedConfigAnnotation] != "" {
		t.Errorf("slim VM kept what vmipam never reads: %+v", slim)
	}
	want.Spec = vmv1.VirtualMachineSpec{Networks: want.Spec.Networks}
	want.Status = vmv1.VirtualMachineStatus{Phase: want.Status.Phase,
		Networks: []vmv1.NetworksStatus{{Type: vmv1.NetworkTypeNetwork, Name: "corp", MACAddress: "aa"}}}
	want.ManagedFields = nil
	delete(want.Annotations, corev1.LastAppliedConfigAnnotation)
	if !equality.Semantic.DeepEqual(slim, want) {
		t.Errorf("slim VM lost what vmipam reads:\n got %+v\nwant %+v", slim, want)
	}
}

func TestSlimNamespaceAndIPAddressKeepMetadata(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"env": "prod"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
	out, _ := slimNamespace(ns)
	if s := out.(*corev1.Namespace); s.Name != "team-a" || s.Labels["env"] != "prod" || len(s.ManagedFields) != 0 ||
		len(s.Spec.Finalizers) != 0 || s.Status.Phase != "" {
		t.Errorf("slim namespace: %+v", s)
	}
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "ip", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "sdn"}},
		Labels: map[string]string{"virtualization.deckhouse.io/virtual-machine-uid": "u"}, Annotations: map[string]string{"ipam.virtualization.deckhouse.io/interface": "Network/corp"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "VirtualMachine", Name: "web", UID: "u"}}},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto}, Status: sdnv1.IPAddressStatus{Address: "10.0.0.1",
			Routes:     []sdnv1.Route{{Destination: "10.20.0.0/16", Via: "10.0.0.254"}},
			UsedByPods: []apiextensionsv1.JSON{{Raw: []byte(`{"name":"virt-launcher-web-x"}`)}},
			Conditions: []metav1.Condition{{Type: sdnv1.ConditionAttached, Status: metav1.ConditionTrue},
				{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionTrue, Reason: sdnv1.ReasonIPAddressAllocated}}}}
	out, _ = slimIPAddress(ip)
	if s := out.(*sdnv1.IPAddress); len(s.ManagedFields) != 0 || len(s.Labels) != 0 || s.Spec.Type != sdnv1.IPAddressTypeAuto ||
		s.Status.Address != "10.0.0.1" || len(s.OwnerReferences) != 1 || s.Annotations["ipam.virtualization.deckhouse.io/interface"] == "" ||
		s.Status.Routes != nil || s.Status.UsedByPods != nil || len(s.Status.Conditions) != 1 || s.Status.Conditions[0].Type != sdnv1.ConditionAllocated {
		t.Errorf("slim IPAddress: %+v", s)
	}
}

func TestSlimRecordKeepsEverythingButManagedFields(t *testing.T) {
	now := metav1.NowMicro()
	id := int64(2)
	rec := &v1alpha1.VirtualMachineIPAM{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "VirtualMachineIPAM"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-rec", ResourceVersion: "9", Generation: 3,
			Labels:          map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine", Name: "web", UID: "uid-web"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "ipam-controller"}}},
		Spec: v1alpha1.VirtualMachineIPAMSpec{VMUID: "uid-web", VMGeneration: 4,
			Interfaces: []v1alpha1.InterfaceDecision{{ID: &id, Type: "ClusterNetwork", Name: "corp", Allocation: v1alpha1.AllocationAuto,
				IPAddressName: "web-cn-corp-abcdef", Address: "10.0.0.1", Attach: true, Hotplug: true, Reason: "IPAddressPending",
				Message: "waiting for SDN", DecidedBy: &v1alpha1.Provenance{Allocation: "default", Hotplug: "hp", Skip: "skip"}}},
			Releases: []v1alpha1.Release{{Type: v1alpha1.ReleaseStatic, IPAddressName: "db", UID: "uid-db", Since: now}},
			Summary:  v1alpha1.RecordSummary{Attached: "0/1", Reason: "IPAddressPending"}},
		Status: v1alpha1.VirtualMachineIPAMStatus{ObservedGeneration: 3,
			Conditions: []metav1.Condition{{Type: "Applied", Status: metav1.ConditionTrue, Reason: "Applied", Message: "ok"}}},
	}
	want := rec.DeepCopy()
	want.ManagedFields = nil
	out, err := slimRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(*v1alpha1.VirtualMachineIPAM); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("slimRecord changed the record:\n got %+v\nwant %+v", got, want)
	}
	if tomb, _ := slimRecord(cache.DeletedFinalStateUnknown{Key: "ns/web"}); tomb == nil {
		t.Error("a tombstone must pass through")
	}
}
