package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
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
// Every type of it is declared in this package (or is another API's: IPAddress, the record's
// spec, metav1.Condition) and filled from the controller's and the evaluator's types in one
// place, controller/dryrun/convert, so that no internal change alters what is served.
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
	Interfaces []InterfaceResult `json:"interfaces"`
	// actions are the writes the controller would make.
	// +optional
	Actions Actions `json:"actions"`
	// applied is what the VM would look like once its virtualization controller applies the
	// record (computed with the consumer package, docs/INTEGRATION.md).
	// +optional
	Applied AppliedVM `json:"applied"`
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
type PolicySummary struct {
	// source is Installed, Request or (offline) Shipped.
	// +optional
	Source string `json:"source"`
	// order lists the policies in evaluation order; the built-in default follows them.
	// +optional
	Order []string `json:"order,omitempty"`
}

// Actions are the writes one reconcile would make; the dry run makes none of them.
type Actions struct {
	// createIPAddresses are the Auto IPAddresses the controller would create.
	// +optional
	CreateIPAddresses []*sdnv1.IPAddress `json:"createIPAddresses,omitempty"`
	// deleteIPAddresses are the names of the VM's Auto IPAddresses no interface wants: the
	// controller deletes each ReleaseGrace (5 s) after its record let it go, once nothing
	// names it.
	// +optional
	DeleteIPAddresses []string `json:"deleteIPAddresses,omitempty"`
	// record is the spec of the VM's decision record (VirtualMachineIPAM) the controller would
	// write; recordChanged says whether it differs from the record there is.
	// +optional
	Record *ipamv1.VirtualMachineIPAMSpec `json:"record,omitempty"`
	// +optional
	RecordChanged bool `json:"recordChanged"`
	// deferred: the only problems are IPAddresses or networks SDN is about to answer (new
	// ones it has not answered yet); the controller creates the IPAddresses and holds the
	// record write back, expecting the answer: up to 30 s (5 s for a network or an Auto
	// IPAddress SDN answered without an address; up to 10 min for a new VM's Auto IPAddresses
	// while SDN works through a backlog).
	// +optional
	Deferred bool `json:"deferred,omitempty"`
}

// AppliedVM is what the VM would look like once the virtualization controller applied the
// record: its launcher pods' networks-spec, its status.networks and the conditions it builds
// from the record.
type AppliedVM struct {
	// nextBootNetworksSpec is the networks-spec of the VM's next launcher pod (its next start).
	// +optional
	NextBoot []sdnv1.NetworksSpecEntry `json:"nextBootNetworksSpec"`
	// runningNetworksSpec is the networks-spec of its running launcher pods (what is applied
	// live); absent when the VM does not run.
	// +optional
	Running []sdnv1.NetworksSpecEntry `json:"runningNetworksSpec,omitempty"`
	// heldUntilRestart lists the interfaces ("<Type>/<name>") whose change waits for the next
	// start because a policy forbids hotplugging it.
	// +optional
	HeldUntilRestart []string `json:"heldUntilRestart,omitempty"`
	// networks is status.networks with the addresses the attached interfaces would carry.
	// +optional
	Networks []vmv1.NetworksStatus `json:"networks"`
	// conditions are the conditions the virtualization controller builds from the record:
	// NetworkReady and, while a change waits for a restart,
	// AwaitingRestartToApplyConfiguration.
	// +optional
	Conditions []metav1.Condition `json:"conditions"`
}
