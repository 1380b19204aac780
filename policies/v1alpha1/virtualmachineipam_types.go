package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Allocation is how an interface gets its address (DESIGN.md §1): Auto (an IPAddress vmipam
// creates and owns), Static (the user's IPAddress named in spec.networks[].ipAddressName) or
// None (L2 only). The empty value means no allocation was decided (a policy error).
// +kubebuilder:validation:Enum=Auto;Static;None
type Allocation string

// Allocations of a decided interface.
const (
	AllocationAuto   Allocation = "Auto"
	AllocationStatic Allocation = "Static"
	AllocationNone   Allocation = "None"
)

// ReleaseType says what a Release waits for.
// +kubebuilder:validation:Enum=Auto;Static
type ReleaseType string

// Release types.
const (
	// ReleaseAuto: one of the VM's Auto IPAddresses that nothing wants any more; vmipam
	// deletes it once ReleaseGrace has passed since Since and nothing names it.
	ReleaseAuto ReleaseType = "Auto"
	// ReleaseStatic: a static IPAddress this VM's record stopped attaching at Since; the VM
	// holds it against every other VM until ReleaseGrace has passed (the static handoff).
	ReleaseStatic ReleaseType = "Static"
)

// InterfaceDecision is vmipam's decision for one additional interface of the VM: one per
// additional spec.networks entry, in spec order, then one per interface removed from the spec
// whose removal waits for a restart. Consumers follow DESIGN.md §2.3, which the Go package
// github.com/vmipam/vmipam/policies/consumer implements.
type InterfaceDecision struct {
	// ID is the spec entry's id (the guest NIC's ACPI index), when set.
	// +optional
	ID *int64 `json:"id,omitempty"`
	// Type is the network's kind: Network or ClusterNetwork.
	Type NetworkKind `json:"type"`
	// Name is the network's name, as the VM's spec entry gives it.
	Name string `json:"name"`
	// Allocation is the decided allocation; empty when the policies could not decide it.
	// +optional
	Allocation Allocation `json:"allocation,omitempty"`
	// IPAddressName is the IPAddress the interface carries when attached: the user's static
	// one, or the Auto one vmipam created; empty for None.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	IPAddressName string `json:"ipAddressName,omitempty"`
	// Address is the address SDN allocated to IPAddressName (no mask), when the interface is
	// attached and the IPAddress allocated: what the guest gets by DHCP. A consumer shows it in
	// status.networks[].ipAddress while the VM does not run (docs/INTEGRATION.md).
	// +optional
	// +kubebuilder:validation:MaxLength=45
	Address string `json:"address,omitempty"`
	// Attach: provision the interface (a networks-spec entry and a guest NIC). With Reason
	// set too, the interface stays attached through a transient problem (SDN catching up, a
	// network flapping, a policy error): the problem is reported, nothing is unplugged.
	Attach bool `json:"attach"`
	// Hotplug: a change of this interface against what a running VM has may be applied to it
	// live; false holds the change until the VM's next start (AwaitingRestart).
	Hotplug bool `json:"hotplug"`
	// Removed: the spec no longer names the interface, but its running launcher pod carries it
	// and the removal is held until the next start (Hotplug is false). Such an entry is kept
	// attached, as it is applied, until then.
	// +optional
	Removed bool `json:"removed,omitempty"`
	// Reason is the CamelCase reason of the interface's NetworkReady item (why it is not
	// attached, or what transient problem it has), e.g. IPAddressNotFound.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// Message is the item's human-readable text, already made safe for the condition (no
	// item separators, no control or bidi characters) and at most 1 KiB.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// DecidedBy is the decision's provenance.
	// +optional
	DecidedBy *Provenance `json:"decidedBy,omitempty"`
}

// Provenance names the policies (and the rule) behind a decision.
type Provenance struct {
	// Allocation is the policy that decided the allocation.
	// +optional
	Allocation string `json:"allocation,omitempty"`
	// Hotplug is the policy that decided hotplug.
	// +optional
	Hotplug string `json:"hotplug,omitempty"`
	// Skip is "<policy>/<rule>" of the skip rule that skipped the interface.
	// +optional
	Skip string `json:"skip,omitempty"`
}

// Release is vmipam's own bookkeeping of an address on its way out, kept in the record so that
// a new leader honours a wait its predecessor started (docs/RELIABILITY.md, "Release grace").
// Consumers ignore it.
type Release struct {
	// Type says what the release waits for: Auto (a deletion) or Static (a handoff).
	Type ReleaseType `json:"type"`
	// IPAddressName is the IPAddress released.
	// +kubebuilder:validation:MaxLength=253
	IPAddressName string `json:"ipAddressName"`
	// UID is the Auto IPAddress's UID: a new object of the same name starts its own wait.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// Since is when the record stopped wanting the address: the write the wait is timed from.
	Since metav1.MicroTime `json:"since"`
}

// RecordSummary is what `kubectl get virtualmachineipams` shows of the decisions.
type RecordSummary struct {
	// Attached is "<attached>/<interfaces>": the VM's additional interfaces decided attached,
	// of all of them (removed ones not counted).
	Attached string `json:"attached"`
	// Reason is the reason of the first interface that is not attached, or of the first with
	// a transient problem; empty when there is none.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// VirtualMachineIPAMSpec is vmipam's decision for a VM, written by vmipam only.
type VirtualMachineIPAMSpec struct {
	// VMUID is the UID of the VM decided; a consumer ignores a record of another UID (an
	// earlier VM of the same name).
	VMUID types.UID `json:"vmUID"`
	// VMGeneration is the VM's metadata.generation decided; a consumer treats the interfaces
	// of a newer VM generation as undecided until vmipam writes it.
	VMGeneration int64 `json:"vmGeneration"`
	// Interfaces are the decisions, one per additional spec.networks entry in spec order, then
	// the removals held until restart.
	// +optional
	// +listType=atomic
	Interfaces []InterfaceDecision `json:"interfaces,omitempty"`
	// Releases are vmipam's pending releases of addresses (bookkeeping; consumers ignore it).
	// +optional
	// +listType=atomic
	Releases []Release `json:"releases,omitempty"`
	// Summary is a digest of Interfaces for printing.
	// +optional
	Summary RecordSummary `json:"summary,omitempty"`
}

// VirtualMachineIPAMStatus is written by the consumer (the virtualization controller): what it
// applied.
type VirtualMachineIPAMStatus struct {
	// ObservedGeneration is the record generation the VM's launcher pods and next-boot
	// configuration follow.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the consumer's.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VirtualMachineIPAM is vmipam's decision record for one VirtualMachine (DESIGN.md §2.3): the
// same name and namespace as the VM, a controller ownerReference to it (garbage-collected with
// it). vmipam writes spec, the virtualization controller applies it and writes status.
// docs/INTEGRATION.md is the consumer's contract.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=vmipam
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Attached",type=string,JSONPath=`.spec.summary.attached`,description="additional interfaces attached / all"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.summary.reason`,description="the first interface's problem"
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.metadata.generation`,description="the record's generation vmipam wrote"
// +kubebuilder:printcolumn:name="Observed",type=integer,JSONPath=`.status.observedGeneration`,description="the generation the virtualization controller applied"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachineIPAM struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineIPAMSpec   `json:"spec,omitempty"`
	Status VirtualMachineIPAMStatus `json:"status,omitempty"`
}

// VirtualMachineIPAMList is a list of VirtualMachineIPAMs.
//
// +kubebuilder:object:root=true
type VirtualMachineIPAMList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineIPAM `json:"items"`
}
