package v1alpha1

// Input is what the policies saw about one additional interface (DESIGN.md §3.1, the CEL
// variables of docs/POLICIES.md): each top-level field is the CEL variable of the same JSON
// name. Every field is present; a zero value ("", 0, false, null) stands for "unset", and an
// empty map or list is null.
type Input struct {
	// vm is the VirtualMachine the interface belongs to (CEL: vm).
	VM InputVM `json:"vm"`
	// interface is the spec.networks entry decided (CEL: interface).
	Interface InputInterface `json:"interface"`
	// network is the network the interface names (CEL: network).
	Network InputNetwork `json:"network"`
	// ipAddress is the IPAddress the interface would use (CEL: ipAddress).
	IPAddress InputIPAddress `json:"ipAddress"`
	// holders are the other VMs wanting the same static IPAddress (CEL: holders).
	Holders InputHolders `json:"holders"`
	// namespaceObject is the VM's Namespace (CEL: namespaceObject).
	Namespace InputNamespace `json:"namespaceObject"`
	// change is how the interface differs from what is applied (CEL: change).
	Change InputChange `json:"change"`
}

// InputVM describes the VirtualMachine (virtualization.deckhouse.io/v1alpha2) owning the
// interface.
type InputVM struct {
	// name is the VM's metadata.name.
	Name string `json:"name"`
	// namespace is the VM's metadata.namespace.
	Namespace string `json:"namespace"`
	// uid is the VM's metadata.uid (a stand-in derived from namespace and name for a VM that
	// does not exist).
	UID string `json:"uid"`
	// labels are the VM's metadata.labels.
	Labels map[string]string `json:"labels"`
	// annotations are the VM's metadata.annotations.
	Annotations map[string]string `json:"annotations"`
	// phase is the VM's status.phase: Pending, Starting, Running, Stopping, Stopped,
	// Migrating, …; empty when unset.
	Phase string `json:"phase"`
	// creationTimestamp is the VM's metadata.creationTimestamp in RFC 3339 with fractional
	// seconds when it has them (2026-01-02T15:04:05Z); "0001-01-01T00:00:00Z" when unset.
	CreationTimestamp string `json:"creationTimestamp"`
}

// InputInterface is one entry of the VM's spec.networks.
type InputInterface struct {
	// index is the entry's position in spec.networks, from 0; -1 for a removed interface.
	Index int64 `json:"index"`
	// id is spec.networks[].id, 0 when unset.
	ID int64 `json:"id"`
	// type is Network or ClusterNetwork.
	Type string `json:"type"`
	// name is the network's name.
	Name string `json:"name"`
	// ipAddressName is spec.networks[].ipAddressName, empty when unset.
	IPAddressName string `json:"ipAddressName"`
	// macAddress is the NIC's MAC from the VM's status.networks entry matched to this spec
	// entry ("02:…" in colon notation); empty before the virtualization controller wrote one,
	// and for a removed interface.
	MACAddress string `json:"macAddress"`
	// spec is the whole spec entry.
	Spec InputInterfaceSpec `json:"spec"`
}

// InputInterfaceSpec is a VirtualMachine spec.networks[] entry as it is written; unset fields
// are zero.
type InputInterfaceSpec struct {
	// id is spec.networks[].id.
	ID int64 `json:"id"`
	// type is spec.networks[].type.
	Type string `json:"type"`
	// name is spec.networks[].name.
	Name string `json:"name"`
	// virtualMachineMACAddressName is spec.networks[].virtualMachineMACAddressName.
	VirtualMachineMACAddressName string `json:"virtualMachineMACAddressName"`
	// ipAddressName is spec.networks[].ipAddressName.
	IPAddressName string `json:"ipAddressName"`
}

// InputNetwork describes the SDN Network or ClusterNetwork the interface names.
type InputNetwork struct {
	// exists is false when no such network was found; every other field is then zero.
	Exists bool `json:"exists"`
	// type is a ClusterNetwork's spec.type, VLAN or Access; empty when unset and for a
	// Network, which has none.
	Type string `json:"type"`
	// ready is the network's Ready condition being True (SDN).
	Ready bool `json:"ready"`
	// ipamEnabled: spec.ipam.ipAddressPoolRef.name is set.
	IPAMEnabled bool `json:"ipamEnabled"`
	// pool is spec.ipam.ipAddressPoolRef: kind ClusterIPAddressPool or IPAddressPool, and
	// name.
	Pool InputRef `json:"pool"`
	// labels are the network's metadata.labels.
	Labels map[string]string `json:"labels"`
}

// InputRef is a reference by kind and name.
type InputRef struct {
	// kind is the referenced kind, e.g. ClusterNetwork or IPAddressPool.
	Kind string `json:"kind"`
	// name is the referenced object's name.
	Name string `json:"name"`
}

// InputOwner is the VM an IPAddress belongs to (its controller ownerReference).
type InputOwner struct {
	// name is the owner VM's name.
	Name string `json:"name"`
	// uid is the owner VM's UID.
	UID string `json:"uid"`
}

// InputIPAddress describes the SDN IPAddress the interface would use: the static one named by
// ipAddressName, or the VM's own Auto one for this interface.
type InputIPAddress struct {
	// exists is false when the IPAddress was not found; name is then still the name looked
	// for and the rest zero.
	Exists bool `json:"exists"`
	// name is the IPAddress's name.
	Name string `json:"name"`
	// type is Auto or Static (SDN spec.type).
	Type string `json:"type"`
	// networkRef is spec.networkRef: the Network or ClusterNetwork the address belongs to.
	NetworkRef InputRef `json:"networkRef"`
	// phase is Pending or Allocated (SDN status.phase).
	Phase string `json:"phase"`
	// address is status.address, e.g. 10.10.0.7.
	Address string `json:"address"`
	// allocated: the Allocated condition (SDN) is True and an address is set.
	Allocated bool `json:"allocated"`
	// reason is the Allocated condition's reason, e.g. NoFreeIPAddress.
	Reason string `json:"reason"`
	// owner is the controlling VM; zero when the IPAddress has none.
	Owner InputOwner `json:"owner"`
}

// InputHolders describes who else wants the same static IPAddress on the same network
// (DESIGN.md §4.4).
type InputHolders struct {
	// vms are the names of the other VMs of the namespace that reference the IPAddress.
	VMs []string `json:"vms"`
	// holder is the VM that holds the IPAddress now, possibly this one; empty when nobody
	// does.
	Holder string `json:"holder"`
}

// InputNamespace describes the VM's Namespace.
type InputNamespace struct {
	// name is the namespace's name.
	Name string `json:"name"`
	// labels are the namespace's metadata.labels.
	Labels map[string]string `json:"labels"`
}

// InputChange is what differs between the applied state of the interface and the decided one.
type InputChange struct {
	// kind is None, Add, Remove, ModeChange or AddressChange.
	Kind string `json:"kind"`
	// from is the interface as applied now (zero for an interface being added).
	From InputChangeState `json:"from"`
	// to is the interface as decided (zero for an interface being removed).
	To InputChangeState `json:"to"`
	// vmRunning: the VM has a running launcher pod the change would be hot-plugged into.
	VMRunning bool `json:"vmRunning"`
}

// InputChangeState is one side of an InputChange.
type InputChangeState struct {
	// allocation is Auto, Static, None, or empty for an interface that is not attached.
	Allocation string `json:"allocation"`
	// ipAddressName is the static IPAddress's name, empty otherwise.
	IPAddressName string `json:"ipAddressName"`
}
