package dryrun

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vmctrl "github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// The dry-run API: the endpoint's path and the identification of its answers.
const (
	// Path is where the controller serves evaluations (POST).
	Path = "/apis/dryrun/v1alpha1/evaluate"
	// APIVersion identifies request and result bodies.
	APIVersion = "dryrun/v1alpha1"
	// KindRequest is the optional kind of a request body.
	KindRequest = "EvaluationRequest"
	// KindResult is the kind of a result body.
	KindResult = "Evaluation"
	// MaxBodyBytes is the largest request body the endpoint reads (3 MiB: the API server's
	// own limit on one object is 1.5 MiB, and a request carries a few of them).
	MaxBodyBytes = 3 << 20
)

// Body is a request as it travels: JSON or YAML with the VM, optional candidate policies and
// optional objects to overlay, each a Kubernetes manifest. apiVersion and kind are optional;
// when given they must be APIVersion and KindRequest.
type Body struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	// VM is the VirtualMachine to evaluate; it may or may not exist in the cluster.
	VM json.RawMessage `json:"vm"`
	// Policies, when given, replace the installed ClusterIPAMPolicies for this request.
	Policies []json.RawMessage `json:"policies,omitempty"`
	// Objects are overlaid on the cluster's state for this request only (see AllowedKinds).
	Objects []json.RawMessage `json:"objects,omitempty"`
}

// Request is a decoded, validated request.
type Request struct {
	VM *vmv1.VirtualMachine
	// Policies are the candidate policies, validated against the CRD; nil means the installed
	// ones decide.
	Policies []v1alpha1.ClusterIPAMPolicy
	// Objects are typed, in the VM's namespace or cluster-scoped.
	Objects []client.Object

	// compiled are Policies as Decode compiled them, with the built-in default; nil for a
	// Request built otherwise (Evaluate compiles Policies then).
	compiled *evaluator.Set
}

// Result is the answer to a request: what one reconcile of the VM would do.
type Result struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// VM identifies the evaluated VM.
	VM VMSummary `json:"vm"`
	// Policies says which policies decided.
	Policies PolicySummary `json:"policies"`
	// Interfaces has one entry per additional interface, in spec order, with its decision
	// and trace.
	Interfaces []vmctrl.InterfaceResult `json:"interfaces"`
	// Actions are the writes the controller would make.
	Actions Actions `json:"actions"`
	// Status is the VM status vmipam would write.
	Status StatusSummary `json:"status"`
}

// VMSummary identifies the evaluated VM.
type VMSummary struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the live VM's, or for a VM that does not exist a stand-in derived from its
	// namespace and name.
	UID string `json:"uid"`
	// Exists says whether a VM of that name was found (in the cluster or among the objects);
	// its metadata and status were then merged with the request's VM.
	Exists bool `json:"exists"`
}

// Policy sources.
const (
	// PoliciesInstalled: the installed policies decided (offline: the shipped defaults).
	PoliciesInstalled = "Installed"
	// PoliciesRequest: the request's candidate policies decided.
	PoliciesRequest = "Request"
)

// PolicySummary says which policies decided.
type PolicySummary struct {
	// Source is PoliciesInstalled or PoliciesRequest.
	Source string `json:"source"`
	// Order lists the policies in evaluation order; the built-in default follows them.
	Order []string `json:"order"`
}

// Actions are the writes one reconcile would make; the dry run makes none of them.
type Actions struct {
	// CreateIPAddresses are the Auto IPAddresses the controller would create.
	CreateIPAddresses []*sdnv1.IPAddress `json:"createIPAddresses,omitempty"`
	// DeleteIPAddresses are the names of the VM's Auto IPAddresses it would delete.
	DeleteIPAddresses []string `json:"deleteIPAddresses,omitempty"`
	// VMNetworksSpec is the networks-spec annotation for the VM (its next launcher pod).
	VMNetworksSpec vmctrl.NetworksSpecWrite `json:"vmNetworksSpec"`
	// Pods are the networks-spec annotations for the running launcher pods (live apply).
	Pods []vmctrl.PodWrite `json:"pods,omitempty"`
	// PendingRestart lists the interfaces ("<Type>/<name>") whose change waits for a
	// restart because a policy forbids hotplugging it.
	PendingRestart []string `json:"pendingRestart,omitempty"`
	// Deferred: the only problems are Auto IPAddresses SDN has not allocated yet and that
	// are new; the controller creates them and holds the networks-spec and status writes
	// back for a few seconds (vm.FreshPendingGrace), expecting the allocation.
	Deferred bool `json:"deferred,omitempty"`
}

// StatusSummary is the part of the VM status vmipam writes.
type StatusSummary struct {
	// Networks is status.networks after the reconcile.
	Networks []vmv1.NetworksStatus `json:"networks"`
	// Conditions are vmipam's conditions after the reconcile: NetworkReady and, while a
	// change waits for a restart, AwaitingRestartToApplyConfiguration.
	Conditions []metav1.Condition `json:"conditions"`
	// Changed says whether the status differs from the VM's current one (and would be
	// written).
	Changed bool `json:"changed"`
}
