package v1alpha2

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkType is the kind of a VM NIC's network (spec.networks[].type).
// +kubebuilder:validation:Enum=Main;Network;ClusterNetwork
type NetworkType string

// Network types of the virtualization platform.
const (
	// NetworkTypeMain is the pod network; vmipam does not manage it.
	NetworkTypeMain NetworkType = "Main"
	// NetworkTypeNetwork is a namespaced SDN Network in the VM's namespace.
	NetworkTypeNetwork NetworkType = "Network"
	// NetworkTypeClusterNetwork is a cluster-scoped SDN ClusterNetwork.
	NetworkTypeClusterNetwork NetworkType = "ClusterNetwork"
)

// RunPolicy is the VM's start-up policy (spec.runPolicy).
// +kubebuilder:validation:Enum=AlwaysOn;AlwaysOff;Manual;AlwaysOnUnlessStoppedManually
type RunPolicy string

// Run policies of the virtualization platform.
const (
	RunPolicyAlwaysOn                      RunPolicy = "AlwaysOn"
	RunPolicyAlwaysOff                     RunPolicy = "AlwaysOff"
	RunPolicyManual                        RunPolicy = "Manual"
	RunPolicyAlwaysOnUnlessStoppedManually RunPolicy = "AlwaysOnUnlessStoppedManually"
)

// Phase is the VM's lifecycle phase (status.phase).
type Phase string

// VM phases of the virtualization platform.
const (
	PhasePending   Phase = "Pending"
	PhaseStarting  Phase = "Starting"
	PhaseRunning   Phase = "Running"
	PhaseStopping  Phase = "Stopping"
	PhaseStopped   Phase = "Stopped"
	PhaseMigrating Phase = "Migrating"
)

// LabelLauncherVMName is the label KubeVirt puts on a VM's launcher pods; its value is the VM
// name.
const LabelLauncherVMName = "vm.kubevirt.io/name"

// NetworksSpec is one NIC of spec.networks.
type NetworksSpec struct {
	// ID of the NIC, assigned by the virtualization platform.
	// +optional
	ID   *int64      `json:"id,omitempty"`
	Type NetworkType `json:"type"`
	// Name of the Network or ClusterNetwork; empty for Main.
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`
	// +kubebuilder:validation:MinLength=1
	// +optional
	VirtualMachineMACAddressName string `json:"virtualMachineMACAddressName,omitempty"`
	// IPAddressName names a Static IPAddress (SDN) in the VM's namespace to use for this NIC.
	// +kubebuilder:validation:MinLength=1
	// +optional
	IPAddressName string `json:"ipAddressName,omitempty"`
}

// NetworksStatus is one NIC of status.networks.
type NetworksStatus struct {
	// +optional
	ID   *int64      `json:"id,omitempty"`
	Type NetworkType `json:"type"`
	// +optional
	Name string `json:"name,omitempty"`
	// MACAddress is written by the virtualization controller; vmipam preserves it.
	// +optional
	MACAddress string `json:"macAddress,omitempty"`
	// +optional
	VirtualMachineMACAddressName string `json:"virtualMachineMACAddressName,omitempty"`
	// IPAddress is the address SDN allocated for this NIC, written by vmipam.
	// +optional
	IPAddress string `json:"ipAddress,omitempty"`
}

// VirtualMachineSpec is the part of a VM's spec vmipam reads, plus the fields the real CRD
// requires, kept opaque so that manifests written for the real CRD apply unchanged to the
// trimmed one (vmipam never reads them).
type VirtualMachineSpec struct {
	// +optional
	VirtualMachineClassName string `json:"virtualMachineClassName,omitempty"`
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	CPU *apiextensionsv1.JSON `json:"cpu,omitempty"`
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Memory *apiextensionsv1.JSON `json:"memory,omitempty"`
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:pruning:PreserveUnknownFields
	BlockDeviceRefs *apiextensionsv1.JSON `json:"blockDeviceRefs,omitempty"`
	// +kubebuilder:default=AlwaysOnUnlessStoppedManually
	// +optional
	RunPolicy RunPolicy `json:"runPolicy,omitempty"`
	// Networks lists the NICs; without it the VM has only Main.
	// +optional
	Networks []NetworksSpec `json:"networks,omitempty"`
}

// VirtualMachineStatus is the part of a VM's status vmipam reads or writes.
type VirtualMachineStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// +optional
	Networks []NetworksStatus `json:"networks,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VirtualMachine is a KubeVirt-based VM of the virtualization platform.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vm
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Network",type=string,JSONPath=`.status.conditions[?(@.type=='NetworkReady')].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VirtualMachineSpec `json:"spec"`
	// Status keeps, in the trimmed CRD, the fields of the real one that vmipam does not know
	// (guestOSInfo, stats, …): other writers put them there and vmipam's writes must keep them.
	// +kubebuilder:pruning:PreserveUnknownFields
	Status VirtualMachineStatus `json:"status,omitempty"`
}

// VirtualMachineList is a list of VirtualMachines.
//
// +kubebuilder:object:root=true
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachine `json:"items"`
}
