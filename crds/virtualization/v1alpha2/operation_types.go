package v1alpha2

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OperationType is what a VirtualMachineOperation asks for.
// +kubebuilder:validation:Enum=Restart;Start;Stop;Migrate;Evict;Restore;Clone
type OperationType string

// Operation types the virtualization-controller stand-in carries out.
const (
	OperationStart   OperationType = "Start"
	OperationStop    OperationType = "Stop"
	OperationRestart OperationType = "Restart"
	OperationMigrate OperationType = "Migrate"
)

// OperationPhase is the progress of an operation.
type OperationPhase string

// Operation phases of the virtualization platform.
const (
	OperationPhasePending    OperationPhase = "Pending"
	OperationPhaseInProgress OperationPhase = "InProgress"
	OperationPhaseCompleted  OperationPhase = "Completed"
	OperationPhaseFailed     OperationPhase = "Failed"
)

// VirtualMachineOperationSpec names the operation and its VM.
type VirtualMachineOperationSpec struct {
	Type OperationType `json:"type"`
	// +kubebuilder:validation:MinLength=1
	VirtualMachineName string `json:"virtualMachineName"`
}

// VirtualMachineOperationStatus reports progress.
type VirtualMachineOperationStatus struct {
	// +optional
	Phase OperationPhase `json:"phase,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VirtualMachineOperation is an imperative action on a VM (start, stop, restart, migrate).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vmop
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="VirtualMachine",type=string,JSONPath=`.spec.virtualMachineName`
type VirtualMachineOperation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualMachineOperationSpec   `json:"spec"`
	Status VirtualMachineOperationStatus `json:"status,omitempty"`
}

// VirtualMachineOperationList is a list of VirtualMachineOperations.
//
// +kubebuilder:object:root=true
type VirtualMachineOperationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualMachineOperation `json:"items"`
}
