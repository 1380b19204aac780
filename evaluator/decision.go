package evaluator

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
	// Policy is the name of the deciding policy; BuiltinPolicy when the built-in default
	// decided because no installed policy matched.
	Policy string `json:"policy"`
	// Rule is the skip rule that fired, or "" when the interface is not skipped.
	Rule string `json:"rule,omitempty"`
	// Cost is the CEL runtime cost spent on this interface, summed over all expressions of
	// all policies evaluated (k8s.io/apiserver cost units).
	Cost int64 `json:"cost"`
	// Trace explains how the decision was reached.
	Trace Trace `json:"trace"`
}

// Trace explains a Decision, for the dry-run endpoint, the CLI and events.
type Trace struct {
	// Matched lists the policies whose match and matchConditions held, in evaluation order,
	// including the deciding one.
	Matched []string `json:"matched,omitempty"`
	// Shadowed lists Enforce policies that matched after the deciding one (only with
	// Options.Explain).
	Shadowed []string `json:"shadowed,omitempty"`
	// Audit records what each matching Audit-mode policy would have decided.
	Audit []AuditRecord `json:"audit,omitempty"`
	// Variables holds the values of the deciding policy's variables that were evaluated, as
	// CEL literals.
	Variables map[string]string `json:"variables,omitempty"`
	// Errors lists evaluation errors in the order they happened, each "policy <name>: <field
	// path>: <error>": the deciding error, those of Ignore and Audit policies that were passed
	// over, and those of messageExpressions that fell back to the static message.
	Errors []string `json:"errors,omitempty"`
}

// AuditRecord is the would-be decision of an Audit-mode policy.
// Its fields mean what Decision's do; Error is set, and the others are zero, when the policy
// failed to evaluate.
type AuditRecord struct {
	Policy     string     `json:"policy"`            // the Audit policy's name
	Allocation Allocation `json:"allocation"`        // Decision.Allocation
	Skip       bool       `json:"skip"`              // Decision.Skip
	Reason     Reason     `json:"reason,omitempty"`  // Decision.Reason
	Message    string     `json:"message,omitempty"` // Decision.Message
	Hotplug    bool       `json:"hotplug"`           // Decision.Hotplug
	Rule       string     `json:"rule,omitempty"`    // Decision.Rule
	Error      string     `json:"error,omitempty"`   // the evaluation error, with its field path
}
