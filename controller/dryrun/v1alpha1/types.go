package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	vmctrl "github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// Evaluation asks what vmipam would do to a VirtualMachine, and answers in its status.
// Create it (it is never stored, as a SubjectAccessReview): the response carries the status.
// The caller needs create on evaluations in the namespace; naming an existing VM by
// spec.virtualMachineName also needs get on its virtualmachines, and candidate policies in
// spec.policies the verb evaluate on clusteripampolicies.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=evaluations,scope=Namespaced
type Evaluation struct {
	metav1.TypeMeta `json:",inline"`
	// metadata: only the namespace matters; it is the VM's namespace. A name is optional.
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the question: which VM, and optionally which candidate policies and which
	// objects laid over the cluster's state.
	Spec EvaluationSpec `json:"spec"`
	// status is the answer, filled in by the server.
	// +optional
	Status EvaluationStatus `json:"status,omitempty"`
}

// EvaluationSpec is the question. Exactly one of vm and virtualMachineName is required.
type EvaluationSpec struct {
	// vm is a VirtualMachine manifest (virtualization.deckhouse.io/v1alpha2); it may or may
	// not exist. An existing VM of that name is merged as applying the manifest would: this
	// spec, the live UID, status and annotations. Its namespace, when given, must be the
	// Evaluation's.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	VM *runtime.RawExtension `json:"vm,omitempty"`
	// virtualMachineName names an existing VirtualMachine in the Evaluation's namespace to
	// evaluate as it is (needs get on virtualmachines there).
	// +optional
	VirtualMachineName string `json:"virtualMachineName,omitempty"`
	// policies are ClusterIPAMPolicy manifests that replace the installed policies for this
	// evaluation (the built-in default still follows them). Needs the verb evaluate on
	// clusteripampolicies.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Policies []runtime.RawExtension `json:"policies,omitempty"`
	// objects are laid over the cluster's state for this evaluation only: IPAddress, Network,
	// IPAddressPool, VirtualMachine and Pod in the namespace; ClusterNetwork and
	// ClusterIPAddressPool; the namespace's own Namespace.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Objects []runtime.RawExtension `json:"objects,omitempty"`

	// received is the JSON the spec was decoded from (see UnmarshalJSON); nil for a spec
	// built in Go.
	received []byte `json:"-"`
	// decodeError is why the received JSON did not fit the fields above (a value of the
	// wrong type), empty when it did.
	decodeError string `json:"-"`
}

// EvaluationStatus is the answer: what one reconcile of the VM would decide and do. Nothing
// of it was written. It is output only: every field is optional in the schema, so that a
// client sending an Evaluation with an empty status is not refused (the server ignores it).
//
// +kubebuilder:object:generate=false
type EvaluationStatus struct {
	// vm identifies the evaluated VM.
	// +optional
	VM VMSummary `json:"vm"`
	// policies says which policies decided.
	// +optional
	Policies PolicySummary `json:"policies"`
	// interfaces has one entry per additional interface, in spec order, with its decision,
	// provenance, trace and cost.
	// +optional
	Interfaces []vmctrl.InterfaceResult `json:"interfaces"`
	// actions are the writes the controller would make.
	// +optional
	Actions Actions `json:"actions"`
	// vmStatus is the part of the VM's status vmipam would write.
	// +optional
	VMStatus VMStatus `json:"vmStatus"`
	// omitted says what the answer leaves out and why, one sentence each: an answer drawn
	// from the installed policies carries their order, the interfaces' traces (variable
	// values, Audit records, errors) only when the caller may list clusteripampolicies
	// ("trace omitted: requires list clusteripampolicies"). Empty when nothing was left out.
	// +optional
	Omitted []string `json:"omitted,omitempty"`
}

// OmittedPolicyDetails is the Omitted entry of an answer drawn from the installed policies
// for a caller who may not list them.
const OmittedPolicyDetails = "trace, cost and policies.order omitted: requires list clusteripampolicies"

// VMSummary identifies the evaluated VM.
// It is copied with EvaluationStatus.
//
// +kubebuilder:object:generate=false
type VMSummary struct {
	// namespace of the VM.
	// +optional
	Namespace string `json:"namespace"`
	// name of the VM.
	// +optional
	Name string `json:"name"`
	// uid is the live VM's, or for a VM that does not exist a stand-in derived from its
	// namespace and name.
	// +optional
	UID string `json:"uid"`
	// exists says whether a VM of that name was found (in the cluster or among the objects);
	// its metadata and status were then merged with the evaluated manifest.
	// +optional
	Exists bool `json:"exists"`
}

// Policy sources, the values of PolicySummary.Source.
const (
	// PoliciesInstalled: the policies installed in the cluster decided.
	PoliciesInstalled = "Installed"
	// PoliciesShipped: the default policies vmipam ships decided, as on a fresh cluster
	// (offline, with no policies given).
	PoliciesShipped = "Shipped"
	// PoliciesRequest: the candidate policies of spec.policies decided.
	PoliciesRequest = "Request"
)

// PolicySummary says which policies decided.
// It is copied with EvaluationStatus.
//
// +kubebuilder:object:generate=false
type PolicySummary struct {
	// source is Installed, Request or (offline) Shipped.
	// +optional
	Source string `json:"source"`
	// order lists the policies in evaluation order; the built-in default follows them.
	// +optional
	Order []string `json:"order,omitempty"`
}

// Actions are the writes one reconcile would make; the dry run makes none of them.
// It is copied with EvaluationStatus.
//
// +kubebuilder:object:generate=false
type Actions struct {
	// createIPAddresses are the Auto IPAddresses the controller would create.
	// +optional
	CreateIPAddresses []*sdnv1.IPAddress `json:"createIPAddresses,omitempty"`
	// deleteIPAddresses are the names of the VM's Auto IPAddresses it would delete.
	// +optional
	DeleteIPAddresses []string `json:"deleteIPAddresses,omitempty"`
	// vmNetworksSpec is the networks-spec annotation for the VM (its next launcher pod).
	// +optional
	VMNetworksSpec vmctrl.NetworksSpecWrite `json:"vmNetworksSpec"`
	// pods are the networks-spec annotations for the running launcher pods (live apply).
	// +optional
	Pods []vmctrl.PodWrite `json:"pods,omitempty"`
	// pendingRestart lists the interfaces ("<Type>/<name>") whose change waits for a
	// restart because a policy forbids hotplugging it.
	// +optional
	PendingRestart []string `json:"pendingRestart,omitempty"`
	// deferred: the only problems are Auto IPAddresses SDN has not allocated yet and that
	// are new; the controller creates them and holds the networks-spec and status writes
	// back for a few seconds, expecting the allocation.
	// +optional
	Deferred bool `json:"deferred,omitempty"`
}

// VMStatus is the part of the VM status vmipam writes.
// It is copied with EvaluationStatus.
//
// +kubebuilder:object:generate=false
type VMStatus struct {
	// networks is status.networks after the reconcile.
	// +optional
	Networks []vmv1.NetworksStatus `json:"networks"`
	// conditions are vmipam's conditions after the reconcile: NetworkReady and, while a
	// change waits for a restart, AwaitingRestartToApplyConfiguration.
	// +optional
	Conditions []metav1.Condition `json:"conditions"`
	// changed says whether the status differs from the VM's current one (and would be
	// written).
	// +optional
	Changed bool `json:"changed"`
}
