package index

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Field index names. Values are documented with the function that computes them.
const (
	// VMNetwork indexes VirtualMachines by NetworkKey of each additional network they name.
	VMNetwork = "vmipam.spec.networks.network"
	// VMIPAddressName indexes VirtualMachines by each spec.networks[].ipAddressName.
	VMIPAddressName = "vmipam.spec.networks.ipAddressName"
	// IPAddressOwnerBucket indexes IPAddresses, across namespaces (ClusterWide), by the Bucket
	// of the UID of their controlling VirtualMachine. Look them up with OwnedIPAddresses.
	IPAddressOwnerBucket = "vmipam.metadata.ownerReferences.vmUID.bucket"
	// PodVMBucket indexes pods, across namespaces (ClusterWide), by PodBucket of their
	// namespace and the value of their vm.kubevirt.io/name label. Look them up with
	// LauncherPods.
	PodVMBucket = "vmipam.metadata.labels.vmName.bucket"
	// CarriedIPAddress indexes launcher pods by every IPAddress name their networks-spec
	// annotation attaches — who uses an address, whatever the spec says now — except the
	// pod's VM's own Auto IPAddress of each entry (see OwnAuto).
	CarriedIPAddress = "vmipam.metadata.annotations.networksSpec.ipAddressNames"
	// RecordIPAddress indexes VirtualMachineIPAMs by every IPAddress name their decisions
	// attach, except the VM's own Auto IPAddress of each decision (see OwnAuto).
	RecordIPAddress = "vmipam.spec.interfaces.ipAddressName"
	// RecordReleased indexes VirtualMachineIPAMs by every static IPAddress name their
	// releases hand over (spec.releases of type Static).
	RecordReleased = "vmipam.spec.releases.static"
)

// NetworkKey is the index value for a network reference: "<Type>/<name>", e.g.
// "ClusterNetwork/corp". Namespaced Networks are matched within the VM's namespace by the
// cache's namespace scoping.
func NetworkKey(typ, name string) string { return typ + "/" + name }

// Setup registers every index with the manager's cache. Call it before the manager starts.
func Setup(ctx context.Context, idx client.FieldIndexer) error {
	for _, i := range []struct {
		obj   client.Object
		field string
		fn    client.IndexerFunc
	}{
		{&vmv1.VirtualMachine{}, VMNetwork, vmNetworks},
		{&vmv1.VirtualMachine{}, VMIPAddressName, vmIPAddressNames},
		{&sdnv1.IPAddress{}, IPAddressOwnerBucket, ipAddressOwner},
		{&corev1.Pod{}, PodVMBucket, podVM},
		{&corev1.Pod{}, CarriedIPAddress, carried},
		{&v1alpha1.VirtualMachineIPAM{}, RecordIPAddress, recordAttached},
		{&v1alpha1.VirtualMachineIPAM{}, RecordReleased, recordReleased},
	} {
		if err := idx.IndexField(ctx, i.obj, i.field, i.fn); err != nil {
			return fmt.Errorf("index %s: %w", i.field, err)
		}
	}
	return nil
}

func vmNetworks(o client.Object) []string {
	vm, ok := o.(*vmv1.VirtualMachine)
	if !ok {
		return nil
	}
	var out []string
	for _, n := range vm.Spec.Networks {
		if n.Type != vmv1.NetworkTypeMain {
			out = append(out, NetworkKey(string(n.Type), n.Name))
		}
	}
	return out
}

func vmIPAddressNames(o client.Object) []string {
	vm, ok := o.(*vmv1.VirtualMachine)
	if !ok {
		return nil
	}
	var out []string
	for _, n := range vm.Spec.Networks {
		if n.IPAddressName != "" {
			out = append(out, n.IPAddressName)
		}
	}
	return out
}

func ipAddressOwner(o client.Object) []string {
	if ref := ControllerVM(o); ref != nil {
		return []string{Bucket(string(ref.UID))}
	}
	return nil
}

// ControllerVM returns the controlling ownerReference of o when it is a VirtualMachine of
// virtualization.deckhouse.io, or nil.
func ControllerVM(o metav1.Object) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "VirtualMachine" || ref.APIVersion != vmv1.GroupVersion.String() {
		return nil
	}
	return ref
}

func podVM(o client.Object) []string {
	if name := o.GetLabels()[vmv1.LabelLauncherVMName]; name != "" {
		return []string{PodBucket(o.GetNamespace(), name)}
	}
	return nil
}

// carried is the index function of CarriedIPAddress.
func carried(o client.Object) []string {
	vm := o.GetLabels()[vmv1.LabelLauncherVMName]
	entries, _ := sdnv1.ParseNetworksSpec(o.GetAnnotations()[sdnv1.AnnotationNetworksSpec]) // unreadable: attaches nothing
	var out []string
	for _, e := range entries {
		for _, name := range e.IPAddressNames {
			if !OwnAuto(vm, e.Type, e.Name, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// OwnAuto reports whether name is the Auto IPAddress of VM vm's interface on the network of
// type networkType and name network (naming.AutoIPAddress). CarriedIPAddress and
// RecordIPAddress leave such names out: they answer who else uses a *static* IPAddress
// (plan's holders), and nearly every name a VM carries is its own Auto one — at 10,000 VMs
// those were 40,000 one-name index sets, a tenth of the controller's live heap
// (docs/BENCHMARKS.md). A static name that could be someone's Auto name
// (naming.MayBeAutoIPAddress) is looked up without these indexes.
func OwnAuto(vm, networkType, network, name string) bool {
	return vm != "" && naming.MayBeAutoIPAddress(name) && name == naming.AutoIPAddress(vm, networkType, network)
}

// CarriedNames returns the IPAddress names a networks-spec annotation attaches; an unreadable
// annotation attaches nothing.
func CarriedNames(annotation string) []string {
	entries, _ := sdnv1.ParseNetworksSpec(annotation) // unreadable: it attaches nothing SDN can use
	var out []string
	for _, e := range entries {
		out = append(out, e.IPAddressNames...)
	}
	return out
}

// recordAttached is the index function of RecordIPAddress.
func recordAttached(o client.Object) []string {
	rec, ok := o.(*v1alpha1.VirtualMachineIPAM)
	if !ok {
		return nil
	}
	var out []string
	for _, d := range rec.Spec.Interfaces {
		if d.Attach && d.IPAddressName != "" && !OwnAuto(rec.Name, string(d.Type), d.Name, d.IPAddressName) {
			out = append(out, d.IPAddressName)
		}
	}
	return out
}

// recordReleased is the index function of RecordReleased.
func recordReleased(o client.Object) []string {
	rec, ok := o.(*v1alpha1.VirtualMachineIPAM)
	if !ok {
		return nil
	}
	var out []string
	for _, r := range rec.Spec.Releases {
		if r.Type == v1alpha1.ReleaseStatic {
			out = append(out, r.IPAddressName)
		}
	}
	return out
}

// ClusterWide reports whether value of the index field is keyed, and looked up, across
// namespaces only (client.List without InNamespace): a VM's reference to a ClusterNetwork,
// which VMs of every namespace share, and the buckets of IPAddressOwnerBucket and
// PodVMBucket, whose lookups (OwnedIPAddresses, LauncherPods) filter the namespace
// themselves. Every other value is keyed in its object's namespace, and its lookup names the
// namespace it reads.
func ClusterWide(field, value string) bool {
	switch field {
	case IPAddressOwnerBucket, PodVMBucket:
		return true
	case VMNetwork:
		return strings.HasPrefix(value, sdnv1.KindClusterNetwork+"/")
	}
	return false
}
