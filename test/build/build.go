package build

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// VMOption changes a VirtualMachine under construction.
type VMOption func(*vmv1.VirtualMachine)

// VM builds a running (runPolicy AlwaysOn) VirtualMachine with the Main network and the
// given options.
func VM(namespace, name string, opts ...VMOption) *vmv1.VirtualMachine {
	vm := &vmv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: vmv1.VirtualMachineSpec{RunPolicy: vmv1.RunPolicyAlwaysOn,
			Networks: []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeMain}}},
	}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

// OnClusterNetwork adds an interface on a ClusterNetwork; ipAddressName may be "".
func OnClusterNetwork(network, ipAddressName string) VMOption {
	return onNetwork(vmv1.NetworkTypeClusterNetwork, network, ipAddressName)
}

// OnNetwork adds an interface on a namespaced Network; ipAddressName may be "".
func OnNetwork(network, ipAddressName string) VMOption {
	return onNetwork(vmv1.NetworkTypeNetwork, network, ipAddressName)
}

func onNetwork(t vmv1.NetworkType, network, ipAddressName string) VMOption {
	return func(vm *vmv1.VirtualMachine) {
		vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: t, Name: network, IPAddressName: ipAddressName})
	}
}

// WithRunPolicy sets spec.runPolicy.
func WithRunPolicy(p vmv1.RunPolicy) VMOption {
	return func(vm *vmv1.VirtualMachine) { vm.Spec.RunPolicy = p }
}

// WithLabels sets metadata.labels.
func WithLabels(l map[string]string) VMOption {
	return func(vm *vmv1.VirtualMachine) { vm.Labels = l }
}

// Namespace builds a Namespace.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// ClusterPool builds a ClusterIPAddressPool over cidr, restricted to ranges ("a-b") if given.
func ClusterPool(name, cidr string, ranges ...string) *sdnv1.ClusterIPAddressPool {
	return &sdnv1.ClusterIPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: sdnv1.IPAddressPoolSpec{Pools: []sdnv1.Subnet{{Network: cidr, Ranges: ranges}}}}
}

// Pool builds a namespaced IPAddressPool over cidr.
func Pool(namespace, name, cidr string, ranges ...string) *sdnv1.IPAddressPool {
	return &sdnv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: sdnv1.IPAddressPoolSpec{Pools: []sdnv1.Subnet{{Network: cidr, Ranges: ranges}}}}
}

// ClusterNetwork builds a ClusterNetwork using the ClusterIPAddressPool named pool ("" for none).
func ClusterNetwork(name, pool string) *sdnv1.ClusterNetwork {
	n := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if pool != "" {
		n.Spec.IPAM = &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindClusterIPAddressPool, Name: pool}}
	}
	return n
}

// Network builds a namespaced Network using the IPAddressPool named pool ("" for none).
func Network(namespace, name, pool string) *sdnv1.Network {
	n := &sdnv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if pool != "" {
		n.Spec.IPAM = &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindIPAddressPool, Name: pool}}
	}
	return n
}

// StaticIPAddress builds a Static IPAddress asking for ip on the given network.
func StaticIPAddress(namespace, name, networkKind, network, ip string) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeStatic,
			NetworkRef: sdnv1.IPAddressNetworkRef{Kind: networkKind, Name: network},
			Static:     &sdnv1.StaticIP{IP: ip}}}
}
