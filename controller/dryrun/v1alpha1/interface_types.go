package v1alpha1

import (
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

// InterfaceResult is the outcome for one additional interface of the VM, as one reconcile
// would decide it.
type InterfaceResult struct {
	// index is the interface's position in the VM's spec.networks, from 0; -1 for a removed
	// interface.
	Index int `json:"index"`
	// removed: the spec no longer names the interface; attached says whether the running
	// launcher pod keeps it until the restart because its decision forbids hotplug.
	Removed bool `json:"removed,omitempty"`
	// type is the network's kind as the spec entry gives it: Network or ClusterNetwork.
	Type string `json:"type"`
	// name is the network's name as the spec entry gives it.
	Name string `json:"name"`
	// ipAddressName is the IPAddress the interface carries once its record is applied (the
	// static one or its Auto one), or, when it is not attached, the one it would carry.
	IPAddressName string `json:"ipAddressName,omitempty"`
	// address is the allocated address of that IPAddress (SDN's status.address, no mask, e.g.
	// 10.10.0.7), when attached: what the guest gets.
	Address string `json:"address,omitempty"`
	// attached: the VM has the interface once its record is applied — its running launcher
	// pods, or its next start when it does not run.
	Attached bool `json:"attached"`
	// decision is what the policies decided for the interface, with its provenance, cost and
	// trace.
	Decision Decision `json:"decision"`
	// reason is the CamelCase reason of the interface's NetworkReady item: from the decision,
	// from the controller (DuplicateInterface, IPAddressConflict), or AwaitingRestart; empty
	// when the interface has none.
	Reason string `json:"reason,omitempty"`
	// message is the human-readable text of that item, made safe for a condition.
	Message string `json:"message,omitempty"`
}

// Decision is what the layered policies decided for one interface (DESIGN.md §3.2), as the
// evaluator returned it.
type Decision struct {
	// allocation is how the interface gets its address: Auto (vmipam creates an IPAddress
	// owned by the VM and SDN picks the address), Static (the user's IPAddress named by
	// ipAddressName), None (L2 only, no address), or empty when the evaluation failed (the
	// controller then keeps what exists for the interface).
	Allocation string `json:"allocation"`
	// skip: the interface is not attached; reason and message say why.
	Skip bool `json:"skip"`
	// reason is the CamelCase skip reason (a built-in one such as NetworkNotFound or
	// PolicyError, or one a policy chose); empty when the interface is not skipped.
	Reason string `json:"reason,omitempty"`
	// message explains the skip for humans (the NetworkReady condition, events).
	Message string `json:"message,omitempty"`
	// hotplug: a change of this interface may be applied to a running VM.
	Hotplug bool `json:"hotplug"`
	// policy is the policy that determined the outcome: provenance.skip when the interface is
	// skipped, else provenance.allocation ("builtin:default" for the built-in default).
	Policy string `json:"policy"`
	// rule is the name of the skip rule that fired; empty when the interface is not skipped or
	// the skip is a PolicyError. Rules of the built-in safety policy are named
	// "vmipam:<check>".
	Rule string `json:"rule,omitempty"`
	// provenance says which policy decided each part.
	Provenance Provenance `json:"provenance"`
	// cost is the CEL runtime cost spent on the interface, in k8s.io/apiserver cost units,
	// summed over every expression of every policy evaluated: the enforced policies' (at most
	// the controller's per-interface budget, 300,000 by default) and the trial policies' —
	// Audit and failurePolicy Ignore policies and the Audit records' re-evaluations (at most
	// the trial budget, 300,000 by default). It is the same every run for the same input.
	Cost int64 `json:"cost,omitempty"`
	// trace explains how the decision was reached.
	Trace Trace `json:"trace,omitzero"`
	// deadlineExceeded: the evaluation failed (PolicyError) after its wall-clock time ran out
	// (the evaluator's deadline, 1 s by default, or the request's) rather than for its cost or
	// an error of an expression alone; the same input may decide on a retry. False for every
	// other decision.
	DeadlineExceeded bool `json:"deadlineExceeded,omitempty"`
}

// Provenance names the policy that decided each part of a Decision (DESIGN.md §3.3): the
// first matching Enforce policy, in (priority, name) order, that sets the part.
type Provenance struct {
	// allocation is the policy whose allocation expression decided; empty when the evaluation
	// failed before, or for a removed interface (whose allocation is what was applied).
	Allocation string `json:"allocation,omitempty"`
	// skip is the policy whose skip rule fired ("builtin:safety" for a safety rule), or the
	// failing policy of a PolicyError; empty when the interface is not skipped.
	Skip string `json:"skip,omitempty"`
	// hotplug is the policy whose hotplug expression decided; empty when none sets it (then
	// hotplug is true) or the evaluation failed.
	Hotplug string `json:"hotplug,omitempty"`
}

// Trace explains a Decision. A caller who may not list clusteripampolicies gets it empty for
// an answer drawn from the installed policies (status.omitted says so).
type Trace struct {
	// matched lists the policies whose match and matchConditions held, Enforce and Audit, in
	// evaluation order (the built-in default as "builtin:default").
	Matched []string `json:"matched,omitempty"`
	// ignored lists the matching failurePolicy Ignore policies passed over because one of
	// their expressions failed (the error is in errors).
	Ignored []string `json:"ignored,omitempty"`
	// passed lists the policies whose allocation expression returned "Pass".
	Passed []string `json:"passed,omitempty"`
	// replaced lists the skip rules not evaluated because an earlier policy has a rule of the
	// same name.
	Replaced []Replacement `json:"replaced,omitempty"`
	// audit records what each matching Audit-mode policy would have decided.
	Audit []AuditRecord `json:"audit,omitempty"`
	// variables holds, per policy name, the values of the policy's variables that were
	// evaluated, by variable name, as CEL literals of at most 512 bytes (a longer one ends in
	// "…").
	Variables map[string]map[string]string `json:"variables,omitempty"`
	// errors lists the evaluation errors in the order they happened, each "policy <name>:
	// <field path>: <error>": the deciding error, those of Ignore and Audit policies that
	// were passed over, and those of messageExpressions that fell back to the static message.
	Errors []string `json:"errors,omitempty"`
	// failures are the evaluation errors that decided nothing, one per policy: a
	// failurePolicy Ignore policy passed over, an Audit policy whose evaluation (its
	// matchConditions, or its record) failed.
	Failures []PolicyFailure `json:"failures,omitempty"`
	// input is what the policies saw: the CEL variables the interface was decided from. Its
	// schema is left open: it is output only, and its fields follow the CEL variables
	// (docs/POLICIES.md).
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Input *Input `json:"input,omitempty"`
}

// Replacement is a skip rule replaced by name: rule of policy was not evaluated because policy
// by, earlier in order, has a rule of that name.
type Replacement struct {
	// rule is the replaced rule's name.
	Rule string `json:"rule"`
	// policy is the policy whose rule was replaced.
	Policy string `json:"policy"`
	// by is the policy whose rule of the same name replaced it.
	By string `json:"by"`
}

// PolicyFailure is an evaluation error of one policy that its mode or failurePolicy kept from
// deciding.
type PolicyFailure struct {
	// policy is the policy's name.
	Policy string `json:"policy"`
	// mode is the policy's spec.mode: Audit, or Enforce (then failurePolicy is Ignore).
	Mode ipamv1.PolicyMode `json:"mode"`
	// failurePolicy is the policy's spec.failurePolicy.
	FailurePolicy ipamv1.FailurePolicy `json:"failurePolicy"`
	// field is the field path of the expression that failed (spec.skipRules[0].expression),
	// "spec" when no one expression did.
	Field string `json:"field"`
	// error is a sample of the error, at most 256 bytes.
	Error string `json:"error"`
}

// AuditRecord is the would-be decision of an Audit-mode policy: the Decision the layered
// policies would make were it an Enforce policy. Its fields mean what Decision's do; error is
// set, and the others are zero, when the policy itself failed to evaluate.
type AuditRecord struct {
	// policy is the Audit policy's name.
	Policy string `json:"policy"`
	// allocation is the would-be Decision.allocation.
	Allocation string `json:"allocation"`
	// skip is the would-be Decision.skip.
	Skip bool `json:"skip"`
	// reason is the would-be Decision.reason.
	Reason string `json:"reason,omitempty"`
	// message is the would-be Decision.message.
	Message string `json:"message,omitempty"`
	// hotplug is the would-be Decision.hotplug.
	Hotplug bool `json:"hotplug"`
	// rule is the would-be Decision.rule.
	Rule string `json:"rule,omitempty"`
	// provenance is the would-be Decision.provenance.
	Provenance Provenance `json:"provenance"`
	// error is the policy's evaluation error, with its field path; empty when it evaluated.
	Error string `json:"error,omitempty"`
	// differs: the record decides otherwise than the decision it is part of (allocation,
	// skip, reason or hotplug): where the Audit policy, enforced, would change something.
	Differs bool `json:"differs,omitempty"`
}
