package evaluator

import "github.com/vmipam/vmipam/policies/v1alpha1"

// Allocation is how an interface gets its address.
type Allocation string

// Allocations (DESIGN.md §1).
const (
	// AllocationAuto: vmipam creates an IPAddress owned by the VM; SDN picks the address.
	AllocationAuto Allocation = "Auto"
	// AllocationStatic: the user's IPAddress named by ipAddressName is used as is.
	AllocationStatic Allocation = "Static"
	// AllocationNone: L2 only, no address.
	AllocationNone Allocation = "None"
	// AllocationUnknown: evaluation failed; callers keep whatever exists for the interface
	// (an evaluation error must never delete an IPAddress).
	AllocationUnknown Allocation = ""
)

// AllocationPass is what an allocation expression returns to leave the allocation to the next
// matching policy that sets one (as the Pass action of Calico tiers and Kubernetes
// AdminNetworkPolicy). It is never a Decision's Allocation.
const AllocationPass = "Pass"

// Reason is a CamelCase skip reason, used in NetworkReady messages, events, metrics and
// dry-run output. Policies may add their own; these are the built-in ones (DESIGN.md §4.3).
type Reason string

// Built-in skip reasons.
const (
	ReasonNetworkNotFound           Reason = "NetworkNotFound"
	ReasonNetworkNotReady           Reason = "NetworkNotReady"
	ReasonNoIPAMPool                Reason = "NoIPAMPool"
	ReasonIPAddressNotFound         Reason = "IPAddressNotFound"
	ReasonIPAddressNetworkMismatch  Reason = "IPAddressNetworkMismatch"
	ReasonIPAddressNotAllocated     Reason = "IPAddressNotAllocated"
	ReasonIPAddressInUse            Reason = "IPAddressInUse"
	ReasonIPAddressOwnedByAnotherVM Reason = "IPAddressOwnedByAnotherVM"
	ReasonIPAddressPending          Reason = "IPAddressPending"
	ReasonPoolExhausted             Reason = "PoolExhausted"
	// ReasonPolicyError: a policy with failurePolicy Fail could not be evaluated.
	ReasonPolicyError Reason = "PolicyError"
	// ReasonAutoWithIPAddressName: a policy chose Auto for an interface that names a static
	// IPAddress (safety rule vmipam:auto-with-ip-address-name).
	ReasonAutoWithIPAddressName Reason = "AutoWithIPAddressName"
	// ReasonIPAddressConflict: the interface's Auto IPAddress exists but is not controlled by
	// the VM; it is never adopted (safety rule vmipam:auto-not-ours, and the controller).
	ReasonIPAddressConflict Reason = "IPAddressConflict"
)

// Decision is the outcome for one interface (DESIGN.md §3.2).
type Decision struct {
	// Allocation is how the interface gets its address; AllocationUnknown when the
	// evaluation failed.
	Allocation Allocation `json:"allocation"`
	// Skip: the interface is not attached; Reason and Message say why.
	Skip bool `json:"skip"`
	// Reason is the skip reason; "" when the interface is not skipped.
	Reason Reason `json:"reason,omitempty"`
	// Message explains the skip for humans (NetworkReady condition, events).
	Message string `json:"message,omitempty"`
	// Hotplug: a change of this interface may be applied to a running VM.
	Hotplug bool `json:"hotplug"`
	// Policy is the policy that determined the outcome: Provenance.Skip when the interface is
	// skipped, else Provenance.Allocation (BuiltinPolicy for the built-in default).
	Policy string `json:"policy"`
	// Rule is the skip rule that fired, or "" when the interface is not skipped (or the skip is
	// a PolicyError). Rules of the safety policy are named ReservedRulePrefix+"<check>".
	Rule string `json:"rule,omitempty"`
	// Provenance says which policy decided each part.
	Provenance Provenance `json:"provenance"`
	// Cost is the CEL runtime cost spent on this interface, summed over all expressions of
	// all policies evaluated (k8s.io/apiserver cost units): both accounts, the enforced
	// policies' (at most Limits.InterfaceCostBudget) and the trial policies' — Audit and
	// failurePolicy Ignore policies and the Audit records' re-evaluations (at most
	// Limits.TrialCostBudget). It is the same every run for the same input, with or without
	// Options.Explain (formatting the trace draws on the budgets' rest but is not counted).
	Cost int64 `json:"cost,omitempty"`
	// Trace explains how the decision was reached.
	Trace Trace `json:"trace,omitzero"`
	// DeadlineExceeded: the evaluation failed (ReasonPolicyError) after its wall-clock time ran
	// out — the deadline (Limits.Deadline) or the caller's context ended while it ran, or it
	// was abandoned — rather than for its cost or an error of an expression alone. Such a
	// failure depends on how busy the process was as well as on the input: the same input may
	// decide on a retry. False for every other decision.
	DeadlineExceeded bool `json:"deadlineExceeded,omitempty"`
}

// Provenance names the policy that decided each part of a Decision (DESIGN.md §3.3): the
// first matching Enforce policy, in (priority, name) order, that sets the part.
type Provenance struct {
	// Allocation is the policy whose allocation expression decided; "" when the evaluation
	// failed before, or for a removed interface (whose allocation is what was applied).
	Allocation string `json:"allocation,omitempty"`
	// Skip is the policy whose skip rule (Decision.Rule) fired, SafetyPolicy for a safety rule,
	// or the failing policy of a PolicyError; "" when the interface is not skipped.
	Skip string `json:"skip,omitempty"`
	// Hotplug is the policy whose hotplug expression decided; "" when none sets it (then
	// Decision.Hotplug is true) or the evaluation failed.
	Hotplug string `json:"hotplug,omitempty"`
}

// Trace explains a Decision, for the dry-run endpoint, the CLI and events. The dry-run API
// serves its own copy of it (controller/dryrun/v1alpha1.Trace, converted in
// controller/dryrun/convert).
type Trace struct {
	// Matched lists the policies whose match and matchConditions held, Enforce and Audit, in
	// evaluation order (the built-in default as BuiltinPolicy).
	Matched []string `json:"matched,omitempty"`
	// Ignored lists the matching failurePolicy Ignore policies passed over because one of their
	// expressions failed (the error is in Errors).
	Ignored []string `json:"ignored,omitempty"`
	// Passed lists the policies whose allocation expression returned "Pass".
	Passed []string `json:"passed,omitempty"`
	// Replaced lists the skip rules not evaluated because an earlier policy has a rule of the
	// same name.
	Replaced []Replacement `json:"replaced,omitempty"`
	// Audit records what each matching Audit-mode policy would have decided.
	Audit []AuditRecord `json:"audit,omitempty"`
	// Variables holds, per policy name, the values of the policy's variables that were
	// evaluated, as CEL literals of at most 512 bytes (a longer one ends in "…"); only with
	// Options.Explain.
	Variables map[string]map[string]string `json:"variables,omitempty"`
	// Errors lists evaluation errors in the order they happened, each "policy <name>: <field
	// path>: <error>": the deciding error, those of Ignore and Audit policies that were passed
	// over, and those of messageExpressions that fell back to the static message.
	Errors []string `json:"errors,omitempty"`
	// Failures are the evaluation errors that decided nothing, one per policy: a
	// failurePolicy Ignore policy passed over, an Audit policy whose evaluation (its
	// matchConditions, or its record) failed. Present without Options.Explain, for the
	// controller to count by policy and mode and to show on the policy.
	Failures []PolicyFailure `json:"failures,omitempty"`
	// Input is the input the decision was made from (only with Options.Explain), so that a
	// dry run shows what the policies saw.
	Input *Input `json:"input,omitempty"`
}

// Replacement is a skip rule replaced by name: rule Rule of Policy was not evaluated because
// policy By, earlier in order, has a rule of that name.
type Replacement struct {
	Rule   string `json:"rule"`   // the rule's name
	Policy string `json:"policy"` // the policy whose rule was replaced
	By     string `json:"by"`     // the policy whose rule of the same name replaced it
}

// PolicyFailure is an evaluation error of one policy that its mode or failurePolicy kept from
// deciding.
type PolicyFailure struct {
	// Policy is the policy's name.
	Policy string `json:"policy"`
	// Mode and FailurePolicy are the policy's: Audit, or Enforce with failurePolicy Ignore.
	Mode          v1alpha1.PolicyMode    `json:"mode"`
	FailurePolicy v1alpha1.FailurePolicy `json:"failurePolicy"`
	// Field is the field path of the expression that failed (spec.skipRules[0].expression),
	// "spec" when no one expression did.
	Field string `json:"field"`
	// Error is a sample of the error, at most maxFailureSample bytes.
	Error string `json:"error"`
}

// maxFailureSample bounds PolicyFailure.Error.
const maxFailureSample = 256

// AuditRecord is the would-be decision of an Audit-mode policy: the Decision the layered
// policies would make were it an Enforce policy. Its fields mean what Decision's do; Error is
// set, and the others are zero, when the policy itself failed to evaluate.
type AuditRecord struct {
	Policy     string     `json:"policy"`            // the Audit policy's name
	Allocation Allocation `json:"allocation"`        // Decision.Allocation
	Skip       bool       `json:"skip"`              // Decision.Skip
	Reason     Reason     `json:"reason,omitempty"`  // Decision.Reason
	Message    string     `json:"message,omitempty"` // Decision.Message
	Hotplug    bool       `json:"hotplug"`           // Decision.Hotplug
	Rule       string     `json:"rule,omitempty"`    // Decision.Rule
	Provenance Provenance `json:"provenance"`        // Decision.Provenance
	Error      string     `json:"error,omitempty"`   // the evaluation error, with its field path
	// Differs: the record decides otherwise than the Decision it is part of (allocation, skip,
	// reason or hotplug): where the Audit policy, enforced, would change something.
	Differs bool `json:"differs,omitempty"`
}
