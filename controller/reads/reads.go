package reads

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
)

// lastApplied is kubectl's copy of the whole manifest of an object applied client-side: often
// the biggest annotation an object has, and of no use to vmipam. Policies do not see it,
// whatever front end builds their input (plan drops it too, for manifests given to the dry run
// and ipamctl evaluate).
const lastApplied = corev1.LastAppliedConfigAnnotation

// podAnnotations are the launcher pod annotations vmipam reads: what is applied.
var podAnnotations = []string{sdnv1.AnnotationNetworksSpec, consumer.AnnotationDecided}

// VM returns what vmipam reads of vm (see the package documentation) as a new object; vm is
// not changed. Its metadata maps are vm's own unless last-applied-configuration had to be
// dropped; its spec.networks is vm's slice.
func VM(vm *vmv1.VirtualMachine) *vmv1.VirtualMachine {
	out := &vmv1.VirtualMachine{TypeMeta: vm.TypeMeta, ObjectMeta: meta(vm.ObjectMeta),
		Spec:   vmv1.VirtualMachineSpec{Networks: vm.Spec.Networks},
		Status: vmv1.VirtualMachineStatus{Phase: vm.Status.Phase, Networks: statusNetworks(vm.Status.Networks)}}
	return out
}

// LauncherPod returns what vmipam reads of a launcher pod as a new object (pod is not
// changed; the maps are new).
func LauncherPod(pod *corev1.Pod) *corev1.Pod {
	m := &pod.ObjectMeta
	return &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace,
		UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: only(m.Labels, vmv1.LabelLauncherVMName), Annotations: only(m.Annotations, podAnnotations...)},
		Status: corev1.PodStatus{Phase: pod.Status.Phase}}
}

// Namespace returns what vmipam reads of a Namespace: its metadata.
func Namespace(ns *corev1.Namespace) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: ns.TypeMeta, ObjectMeta: meta(ns.ObjectMeta)}
}

// IPAddressAnnotations returns the annotations of an IPAddress vmipam reads (a new map), or
// nil: the interface an Auto IPAddress serves (plan.AnnotationInterface).
func IPAddressAnnotations(annotations map[string]string) map[string]string {
	return only(annotations, plan.AnnotationInterface)
}

// Changed reports whether two versions of a VM or launcher pod differ in what vmipam reads
// (VM, LauncherPod) — beyond the resourceVersion and the pod's generation, which change with
// fields vmipam does not read. The virtualization controller writes the rest of a VM's status
// (conditions, the addresses SDN configured) on every change, and none of it is vmipam's input.
// Objects of other kinds, or of two kinds, are reported changed.
func Changed(old, new client.Object) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		if !ok {
			return true
		}
		a, b := LauncherPod(o), LauncherPod(n)
		a.ResourceVersion, b.ResourceVersion, a.Generation, b.Generation = "", "", 0, 0
		return !equality.Semantic.DeepEqual(a, b)
	case *vmv1.VirtualMachine:
		n, ok := new.(*vmv1.VirtualMachine)
		if !ok {
			return true
		}
		a, b := VM(o), VM(n)
		a.ResourceVersion, b.ResourceVersion = "", ""
		return !equality.Semantic.DeepEqual(a, b)
	}
	return true
}

// meta is m without managedFields and without last-applied-configuration (the annotations
// are copied only when it has to be dropped).
func meta(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.ManagedFields = nil
	if _, ok := m.Annotations[lastApplied]; ok {
		m.Annotations = maps.Clone(m.Annotations)
		delete(m.Annotations, lastApplied)
	}
	return m
}

// statusNetworks keeps of each status.networks entry its network and MAC address.
func statusNetworks(list []vmv1.NetworksStatus) []vmv1.NetworksStatus {
	if len(list) == 0 {
		return nil
	}
	out := make([]vmv1.NetworksStatus, len(list))
	for i, n := range list {
		out[i] = vmv1.NetworksStatus{Type: n.Type, Name: n.Name, MACAddress: n.MACAddress}
	}
	return out
}

// only returns a new map of m's entries under keys, or nil when m has none of them.
func only(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}
