package evaluator

import "time"

// Input is everything a policy sees about one additional VM interface (DESIGN.md §3.1).
// Each top-level field is a CEL variable of the same JSON name: vm, interface, network,
// ipAddress, holders, namespaceObject and change. (The namespace is namespaceObject, as in
// Kubernetes' ValidatingAdmissionPolicy, because `namespace` is a reserved word in CEL and
// cannot be referenced.) Every field is always present (zero values stand for "unset"), so
// a select never fails on a missing field; has(f) is false when f is its zero value — a null
// or empty map or list, "", 0, false — as for a field the API server pruned or omitted.
//
// The `maxSize` tags bound strings (characters) and lists and maps (entries), `elemMaxSize`
// the elements of a list or the values of a map (default 253); the static cost estimate
// assumes them. They come from the Kubernetes limits on the source fields (DNS-1123 names
// 253, label values 63, qualified keys 317, annotations 256 KiB). Counts the API server does
// not bound (labels, annotations, holders) are ours: 256 labels and annotations, far beyond
// the few dozen a VM, Namespace or network carries in practice. Decide refuses an input
// beyond them in a field a policy reads with a PolicyError of that policy naming the field.
type Input struct {
	// VM is the VirtualMachine the interface belongs to (CEL: vm).
	VM VM `json:"vm"`
	// Interface is the spec.networks entry being decided (CEL: interface).
	Interface Interface `json:"interface"`
	// Network is the network the interface names (CEL: network).
	Network Network `json:"network"`
	// IPAddress is the IPAddress the interface would use (CEL: ipAddress).
	IPAddress IPAddress `json:"ipAddress"`
	// Holders are the other VMs wanting the same static IPAddress (CEL: holders).
	Holders Holders `json:"holders"`
	// Namespace is the VM's Namespace (CEL: namespaceObject).
	Namespace Namespace `json:"namespaceObject"`
	// Change is how the interface differs from what is applied (CEL: change).
	Change Change `json:"change"`
}

// VM describes the VirtualMachine (virtualization.deckhouse.io/v1alpha2) owning the interface.
type VM struct {
	// Name is metadata.name.
	Name string `json:"name" maxSize:"253"`
	// Namespace is metadata.namespace.
	Namespace string `json:"namespace" maxSize:"63"`
	// UID is metadata.uid.
	UID string `json:"uid" maxSize:"36"`
	// Labels are metadata.labels; in CEL they iterate in key order.
	Labels map[string]string `json:"labels" maxSize:"256"`
	// Annotations are metadata.annotations; in CEL they iterate in key order.
	Annotations map[string]string `json:"annotations" maxSize:"256" elemMaxSize:"262144"`
	// Phase is status.phase: Pending, Starting, Running, Stopping, Stopped, Migrating, ….
	Phase string `json:"phase" maxSize:"32"`
	// CreationTimestamp is metadata.creationTimestamp (a CEL timestamp).
	CreationTimestamp time.Time `json:"creationTimestamp"`
}

// Interface is one entry of the VM's spec.networks.
type Interface struct {
	// Index is the entry's position in spec.networks, from 0.
	Index int64 `json:"index"`
	// ID is spec.networks[].id, 0 when unset.
	ID int64 `json:"id"`
	// Type is Network or ClusterNetwork (Main interfaces are not evaluated).
	Type string `json:"type" maxSize:"32"`
	// Name is the network's name.
	Name string `json:"name" maxSize:"253"`
	// IPAddressName is spec.networks[].ipAddressName, "" when unset.
	IPAddressName string `json:"ipAddressName" maxSize:"253"`
	// MACAddress is the NIC's MAC: macAddress of the VM's status.networks entry matched to this
	// spec entry (same type and name, repeated entries in order), as the virtualization
	// controller writes it (a 48-bit MAC, "02:…" in colon notation); "" before it wrote one,
	// and for a removed interface.
	MACAddress string `json:"macAddress" maxSize:"17"`
	// Spec is the whole spec entry.
	Spec InterfaceSpec `json:"spec"`
}

// InterfaceSpec mirrors a VirtualMachine spec.networks[] entry; unset fields are zero.
type InterfaceSpec struct {
	// ID is spec.networks[].id.
	ID int64 `json:"id"`
	// Type is spec.networks[].type.
	Type string `json:"type" maxSize:"32"`
	// Name is spec.networks[].name.
	Name string `json:"name" maxSize:"253"`
	// VirtualMachineMACAddressName is spec.networks[].virtualMachineMACAddressName.
	VirtualMachineMACAddressName string `json:"virtualMachineMACAddressName" maxSize:"253"`
	// IPAddressName is spec.networks[].ipAddressName.
	IPAddressName string `json:"ipAddressName" maxSize:"253"`
}

// Network describes the SDN Network or ClusterNetwork the interface names.
type Network struct {
	// Exists is false when no such network is found; every other field is then zero.
	Exists bool `json:"exists"`
	// Type is a ClusterNetwork's spec.type, VLAN or Access; "" when unset and for a Network,
	// which has none (its NetworkClass decides).
	Type string `json:"type" maxSize:"16"`
	// Ready is the network's Ready condition (SDN).
	Ready bool `json:"ready"`
	// IPAMEnabled is true when spec.ipam.ipAddressPoolRef.name is non-empty.
	IPAMEnabled bool `json:"ipamEnabled"`
	// Pool is spec.ipam.ipAddressPoolRef: ClusterIPAddressPool or IPAddressPool, and name.
	Pool Ref `json:"pool"`
	// Labels are the network's metadata.labels.
	Labels map[string]string `json:"labels" maxSize:"256"`
}

// Ref is a reference by kind and name.
type Ref struct {
	// Kind is the referenced kind, e.g. ClusterNetwork or IPAddressPool.
	Kind string `json:"kind" maxSize:"32"`
	// Name is the referenced object's name.
	Name string `json:"name" maxSize:"253"`
}

// Owner is the VM an IPAddress belongs to (its controller ownerReference).
type Owner struct {
	// Name is the owner VM's name.
	Name string `json:"name" maxSize:"253"`
	// UID is the owner VM's UID (compare it with vm.uid).
	UID string `json:"uid" maxSize:"36"`
}

// IPAddress describes the SDN IPAddress the interface would use: the static one named by
// ipAddressName, or the VM's own Auto one for this interface.
type IPAddress struct {
	// Exists is false when the IPAddress is not found; Name is then still the name looked
	// for (the static name, or the Auto name the controller would create) and the rest zero.
	Exists bool `json:"exists"`
	// Name is the IPAddress's name.
	Name string `json:"name" maxSize:"253"`
	// Type is Auto or Static (SDN spec.type).
	Type string `json:"type" maxSize:"16"`
	// NetworkRef is spec.networkRef: the Network or ClusterNetwork the address belongs to.
	NetworkRef Ref `json:"networkRef"`
	// Phase is Pending or Allocated (SDN status.phase).
	Phase string `json:"phase" maxSize:"16"`
	// Address is status.address, e.g. "10.10.0.7".
	Address string `json:"address" maxSize:"45"`
	// Allocated is the Allocated condition (SDN) being True with an address.
	Allocated bool `json:"allocated"`
	// Reason is the Allocated condition's reason, e.g. NoFreeIPAddress.
	Reason string `json:"reason" maxSize:"64"`
	// Owner is the controlling VM; zero when the IPAddress has none.
	Owner Owner `json:"owner"`
}

// Holders describes who else wants the same static IPAddress on the same network (DESIGN.md
// §4.4).
type Holders struct {
	// VMs are the names of the other VMs of the namespace that reference the IPAddress.
	VMs []string `json:"vms" maxSize:"256"`
	// Holder is the VM that holds the IPAddress now ("" when nobody does): the one whose
	// launcher pod carries it, else the one whose decision record attaches it, else the oldest
	// referencing VM (DESIGN.md §4.4). It may be this VM.
	Holder string `json:"holder" maxSize:"253"`
}

// Namespace describes the VM's Namespace.
type Namespace struct {
	// Name is the namespace's name.
	Name string `json:"name" maxSize:"63"`
	// Labels are the namespace's labels, which match.namespaceSelector is matched against.
	Labels map[string]string `json:"labels" maxSize:"256"`
}

// ChangeKind classifies how an interface differs from what is applied to the VM now.
type ChangeKind = string

// Change kinds (DESIGN.md §3.1).
const (
	ChangeNone          ChangeKind = "None"
	ChangeAdd           ChangeKind = "Add"
	ChangeRemove        ChangeKind = "Remove"
	ChangeModeChange    ChangeKind = "ModeChange"
	ChangeAddressChange ChangeKind = "AddressChange"
)

// Change is what differs between the applied state of the interface and the desired one.
type Change struct {
	// Kind is one of the ChangeKind constants.
	Kind string `json:"kind" maxSize:"16"`
	// From is the interface as applied now (zero for an interface being added).
	From ChangeState `json:"from"`
	// To is the interface as desired (zero for an interface being removed).
	To ChangeState `json:"to"`
	// VMRunning says whether the VM has a running launcher pod the change would hot-plug into.
	VMRunning bool `json:"vmRunning"`
}

// removed reports whether the input is of an interface the spec no longer names, which the
// running VM still has: Interface.Index is -1 and Change.Kind is ChangeRemove. (An interface
// the spec names whose decision detaches it is a ChangeRemove too, but is decided in full.)
func (in *Input) removed() bool {
	return in.Interface.Index < 0 && in.Change.Kind == ChangeRemove
}

// ChangeState is one side of a Change.
type ChangeState struct {
	// Allocation is Auto, Static, None, or "" for an interface that is not attached.
	Allocation string `json:"allocation" maxSize:"8"`
	// IPAddressName is the static IPAddress's name, "" otherwise.
	IPAddressName string `json:"ipAddressName" maxSize:"253"`
}

// normalize makes every empty map and list nil, so that has() on it is false whether it was
// null, absent or empty — as in Kubernetes, where the API server drops a null field (pruning)
// and an empty metadata.labels or annotations (omitempty). cel-go's native types report a
// field as set when it is not Go's zero value; a nil map or list still reads as empty
// (size() is 0, iteration visits nothing, a lookup finds no key).
func (in *Input) normalize() {
	for _, m := range []*map[string]string{&in.VM.Labels, &in.VM.Annotations, &in.Network.Labels, &in.Namespace.Labels} {
		if len(*m) == 0 {
			*m = nil
		}
	}
	if len(in.Holders.VMs) == 0 {
		in.Holders.VMs = nil
	}
}
