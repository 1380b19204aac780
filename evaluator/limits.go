package evaluator

import "time"

// Limits bound what one policy expression and one interface evaluation may cost. Costs are in
// k8s.io/apiserver CEL cost units (roughly one unit per value visited, as cel-go and the
// Kubernetes libraries charge them; not a fixed CPU time). docs/PROTECTION.md says which
// limit guarantees what.
type Limits struct {
	// StaticCostLimit refuses, at compile time, an expression whose estimated worst-case cost
	// over the declared input bounds exceeds it: a sanity check, as Kubernetes refuses CRD
	// rules at ten times the per-call limit. An estimate above PerCallCostLimit is admitted
	// with a warning.
	StaticCostLimit uint64
	// PerCallCostLimit stops one expression evaluation with an error when exceeded.
	PerCallCostLimit uint64
	// InterfaceCostBudget is the runtime cost the expressions of the enforced policies
	// (Enforce policies with failurePolicy Fail, the built-in default, the safety policy) may
	// spend on one interface together; past it the evaluation is an error of the policy whose
	// expression crossed it.
	InterfaceCostBudget int64
	// TrialCostBudget is the runtime cost the trial policies — Audit policies, failurePolicy
	// Ignore policies, and everything an Audit record re-evaluates — may spend on one
	// interface together, apart from InterfaceCostBudget so that they never spend what an
	// enforced policy needs; past it the evaluation is an error of the trial policy that
	// crossed it (passed over, or recorded in its Audit record).
	TrialCostBudget int64
	// Deadline bounds the wall time of one interface evaluation: the context is checked
	// between comprehension iterations and before calls, every CheckFrequency checks, and
	// Decide answers by Deadline and a quarter whatever a call does.
	Deadline time.Duration
	// CheckFrequency is how many comprehension iterations or calls run between two checks of
	// the deadline.
	CheckFrequency uint
	// ComprehensionRange bounds the elements one comprehension (all, exists, map, filter, …)
	// may iterate over, checked at run time: cel-go's cost tracker's work grows with the
	// square of a comprehension's iterations (docs/CEL-LIBRARY.md). 256 labels or holders,
	// and two such lists concatenated, fit.
	ComprehensionRange uint64
}

// DefaultLimits are the limits used unless a caller passes others. The per-call limit is a
// tenth of the API server's PerCallLimit (our inputs are small); the static limit ten times
// the per-call limit, as Kubernetes refuses CRD rules. The deadline measures wall time,
// which includes waiting for a CPU: at 100 ms a starved process failed a normal ~100 µs
// decision, so it is 1 s.
var DefaultLimits = Limits{
	StaticCostLimit:     1_000_000,
	PerCallCostLimit:    100_000,
	InterfaceCostBudget: 300_000,
	TrialCostBudget:     300_000,
	Deadline:            time.Second,
	CheckFrequency:      100,
	ComprehensionRange:  512,
}

// withDefaults fills every zero field from DefaultLimits, so that a caller may set only the
// limits it cares about (a zero cost limit or deadline would fail every evaluation).
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.StaticCostLimit == 0 {
		l.StaticCostLimit = d.StaticCostLimit
	}
	if l.PerCallCostLimit == 0 {
		l.PerCallCostLimit = d.PerCallCostLimit
	}
	if l.InterfaceCostBudget <= 0 {
		l.InterfaceCostBudget = d.InterfaceCostBudget
	}
	if l.TrialCostBudget <= 0 {
		l.TrialCostBudget = d.TrialCostBudget
	}
	if l.Deadline <= 0 {
		l.Deadline = d.Deadline
	}
	if l.CheckFrequency == 0 {
		l.CheckFrequency = d.CheckFrequency
	}
	if l.ComprehensionRange == 0 {
		l.ComprehensionRange = d.ComprehensionRange
	}
	return l
}
