package evaluator

import "time"

// Input is everything a policy sees about one additional VM interface (DESIGN.md §3.1).
// Each top-level field is a CEL variable of the same JSON name: vm, interface, network,
// ipAddress, holders, namespace and change. Every field is always present (zero values stand
// for "unset"), so expressions never fail on a missing key; has() is not needed.
//
// The `maxSize` tags bound strings (characters) and lists and maps (entries) for the static
// cost estimate (see limits.go); they come from the Kubernetes limits on the source fields
// (DNS-1123 names 253, label values 63, qualified keys 317). Inputs larger than declared are
// still evaluated: the runtime cost limit, not the estimate, guards them.
type Input struct {
	VM        VM        `json:"vm"`
	Interface Interface `json:"interface"`
	Network   Network   `json:"network"`
	IPAddress IPAddress `json:"ipAddress"`
	Holders   Holders   `json:"holders"`
	Namespace Namespace `json:"namespace"`
	Change    Change    `json:"change"`
}

// VM describes the VirtualMachine (virtualization.deckhouse.io/v1alpha2) owning the interface.
type VM struct {
	Name              string            `json:"name" maxSize:"253"`
	Namespace         string            `json:"namespace" maxSize:"63"`
	UID               string            `json:"uid" maxSize:"36"`
	Labels            map[string]string `json:"labels" maxSize:"64"`
	Annotations       map[string]string `json:"annotations" maxSize:"64"`
	Phase             string            `json:"phase" maxSize:"32"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
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
	// Spec is the whole spec entry.
	Spec InterfaceSpec `json:"spec"`
}

// InterfaceSpec mirrors a VirtualMachine spec.networks[] entry; unset fields are zero.
type InterfaceSpec struct {
	ID                           int64  `json:"id"`
	Type                         string `json:"type" maxSize:"32"`
	Name                         string `json:"name" maxSize:"253"`
	VirtualMachineMACAddressName string `json:"virtualMachineMACAddressName" maxSize:"253"`
	IPAddressName                string `json:"ipAddressName" maxSize:"253"`
}

// Network describes the SDN Network or ClusterNetwork the interface names.
type Network struct {
	// Exists is false when no such network is found; every other field is then zero.
	Exists bool `json:"exists"`
	// Ready is the network's Ready condition (SDN).
	Ready bool `json:"ready"`
	// IPAMEnabled is true when spec.ipam.ipAddressPoolRef.name is non-empty.
	IPAMEnabled bool              `json:"ipamEnabled"`
	Pool        Ref               `json:"pool"`
	Labels      map[string]string `json:"labels" maxSize:"64"`
}

// Ref is a reference by kind and name.
type Ref struct {
	Kind string `json:"kind" maxSize:"32"`
	Name string `json:"name" maxSize:"253"`
}

// Owner is the VM an IPAddress belongs to (its controller ownerReference).
type Owner struct {
	Name string `json:"name" maxSize:"253"`
	UID  string `json:"uid" maxSize:"36"`
}

// IPAddress describes the SDN IPAddress the interface would use: the static one named by
// ipAddressName, or the VM's own Auto one for this interface.
type IPAddress struct {
	Exists bool   `json:"exists"`
	Name   string `json:"name" maxSize:"253"`
	// Type is Auto or Static (SDN spec.type).
	Type       string `json:"type" maxSize:"16"`
	NetworkRef Ref    `json:"networkRef"`
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
	// networks-spec carries it, else the oldest referencing VM. It may be this VM.
	Holder string `json:"holder" maxSize:"253"`
}

// Namespace describes the VM's Namespace.
type Namespace struct {
	Name   string            `json:"name" maxSize:"63"`
	Labels map[string]string `json:"labels" maxSize:"64"`
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
	Kind      string      `json:"kind" maxSize:"16"`
	From      ChangeState `json:"from"`
	To        ChangeState `json:"to"`
	VMRunning bool        `json:"vmRunning"`
}

// ChangeState is one side of a Change.
type ChangeState struct {
	// Allocation is Auto, Static, None, or "" for an interface that is not attached.
	Allocation    string `json:"allocation" maxSize:"8"`
	IPAddressName string `json:"ipAddressName" maxSize:"253"`
}

// normalize fills nil maps and lists so that every field is present for CEL.
func (in *Input) normalize() {
	for _, m := range []*map[string]string{&in.VM.Labels, &in.VM.Annotations, &in.Network.Labels, &in.Namespace.Labels} {
		if *m == nil {
			*m = map[string]string{}
		}
	}
	if in.Holders.VMs == nil {
		in.Holders.VMs = []string{}
	}
}
