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
	Allocation Allocation `json:"allocation"`
	// Skip: the interface is not attached; Reason and Message say why.
	Skip    bool   `json:"skip"`
	Reason  Reason `json:"reason,omitempty"`
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
	Cost  int64 `json:"cost"`
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
	// Errors lists evaluation errors, each "policy <name>: <field path>: <error>", including
	// those of Ignore policies that were passed over.
	Errors []string `json:"errors,omitempty"`
}

// AuditRecord is the would-be decision of an Audit-mode policy.
type AuditRecord struct {
	Policy     string     `json:"policy"`
	Allocation Allocation `json:"allocation"`
	Skip       bool       `json:"skip"`
	Reason     Reason     `json:"reason,omitempty"`
	Message    string     `json:"message,omitempty"`
	Hotplug    bool       `json:"hotplug"`
	Rule       string     `json:"rule,omitempty"`
	Error      string     `json:"error,omitempty"`
}
