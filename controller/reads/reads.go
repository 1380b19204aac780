package reads

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
	return &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: launcherMeta(&pod.ObjectMeta),
		Status: corev1.PodStatus{Phase: pod.Status.Phase}}
}

// LauncherPodMetadata returns what vmipam reads of a launcher pod watched as metadata only
// (NewCache) as a new object (m is not changed; the maps are new): LauncherPod's metadata.
func LauncherPodMetadata(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: launcherMeta(&m.ObjectMeta)}
}

// launcherMeta is what vmipam reads of a launcher pod's metadata.
func launcherMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace,
		UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		Labels: only(m.Labels, vmv1.LabelLauncherVMName), Annotations: only(m.Annotations, podAnnotations...)}
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

// IPAddress returns what vmipam reads of an IPAddress as a new object (ip is not changed; its
// spec, owner references and finalizers are shared): the metadata without labels and
// managedFields, with IPAddressAnnotations only; the spec; of the status the address, network
// and phase and the Allocated condition. Not what SDN's node agent writes once the address is
// in a pod (condition Attached, usedByPods) nor the routes (sdn.md: "IPAddress").
func IPAddress(ip *sdnv1.IPAddress) *sdnv1.IPAddress {
	out := &sdnv1.IPAddress{TypeMeta: ip.TypeMeta, ObjectMeta: ip.ObjectMeta, Spec: ip.Spec,
		Status: sdnv1.IPAddressStatus{Address: ip.Status.Address, Network: ip.Status.Network, Phase: ip.Status.Phase}}
	out.ManagedFields, out.Labels = nil, nil
	out.Annotations = IPAddressAnnotations(ip.Annotations)
	if c := apimeta.FindStatusCondition(ip.Status.Conditions, sdnv1.ConditionAllocated); c != nil {
		out.Status.Conditions = []metav1.Condition{*c}
	}
	return out
}

// Changed reports whether two versions of an object differ in what vmipam reads — beyond the
// resourceVersion and the pod's generation, which change with fields vmipam does not read:
//   - a VM or launcher pod: VM, LauncherPod (LauncherPodMetadata for a pod watched as
//     metadata). The virtualization controller writes the rest of
//     a VM's status (conditions, the addresses SDN configured) on every change;
//   - an IPAddress: IPAddress. SDN's node agent writes Attached and usedByPods as pods come
//     and go;
//   - a Network or ClusterNetwork: its labels, spec, whether SDN wrote its Ready condition and
//     whether that is True.
//     SDN rewrites the attachment counts of its status as nodes come and go, and every VM on
//     the network would be woken for each.
//
// Objects of other kinds, or of two kinds, are reported changed.
func Changed(old, new client.Object) bool {
	switch o := old.(type) {
	case *corev1.Pod:
		n, ok := new.(*corev1.Pod)
		if !ok {
			return true
		}
		return o.Status.Phase != n.Status.Phase || launcherMetaChanged(&o.ObjectMeta, &n.ObjectMeta)
	case *metav1.PartialObjectMetadata: // a launcher pod watched as metadata (NewCache)
		n, ok := new.(*metav1.PartialObjectMetadata)
		return !ok || o.GroupVersionKind() != podKind || n.GroupVersionKind() != podKind ||
			launcherMetaChanged(&o.ObjectMeta, &n.ObjectMeta)
	case *vmv1.VirtualMachine:
		n, ok := new.(*vmv1.VirtualMachine)
		if !ok {
			return true
		}
		a, b := VM(o), VM(n)
		a.ResourceVersion, b.ResourceVersion = "", ""
		return !equality.Semantic.DeepEqual(a, b)
	case *sdnv1.IPAddress:
		n, ok := new.(*sdnv1.IPAddress)
		if !ok {
			return true
		}
		a, b := IPAddress(o), IPAddress(n)
		a.ResourceVersion, b.ResourceVersion = "", ""
		return !equality.Semantic.DeepEqual(a, b)
	case *sdnv1.ClusterNetwork:
		n, ok := new.(*sdnv1.ClusterNetwork)
		return !ok || networkChanged(o.ObjectMeta, n.ObjectMeta, o.Spec, n.Spec, &o.Status, &n.Status)
	case *sdnv1.Network:
		n, ok := new.(*sdnv1.Network)
		return !ok || networkChanged(o.ObjectMeta, n.ObjectMeta, o.Spec, n.Spec, &o.Status, &n.Status)
	}
	return true
}

// launcherMetaChanged reports whether two versions of a launcher pod's metadata differ in what
// vmipam reads (launcherMeta) beyond the resourceVersion and generation.
func launcherMetaChanged(o, n *metav1.ObjectMeta) bool {
	a, b := launcherMeta(o), launcherMeta(n)
	a.ResourceVersion, b.ResourceVersion, a.Generation, b.Generation = "", "", 0, 0
	return !equality.Semantic.DeepEqual(a, b)
}

// networkChanged compares what vmipam reads of a network (plan's observer): labels, spec
// (its pool, its type), whether SDN has written its Ready condition and whether that is True,
// and whether it is being deleted.
func networkChanged(om, nm metav1.ObjectMeta, os, ns any, ost, nst *sdnv1.NetworkStatus) bool {
	oldAnswered, oldReady := ost.Readiness()
	newAnswered, newReady := nst.Readiness()
	return !equality.Semantic.DeepEqual(om.Labels, nm.Labels) || !equality.Semantic.DeepEqual(os, ns) ||
		(om.DeletionTimestamp == nil) != (nm.DeletionTimestamp == nil) || oldAnswered != newAnswered || oldReady != newReady
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
