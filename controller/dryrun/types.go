package dryrun

import (
	"encoding/json"

	"sigs.k8s.io/controller-runtime/pkg/client"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Body is a request before it is decoded: the VM, optional candidate policies and optional
// objects to overlay, each a Kubernetes manifest in JSON — the spec of an Evaluation, or what
// ipamctl reads from files.
type Body struct {
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
