package evaluator

import "time"

// Limits bound what one policy expression and one interface evaluation may cost. Costs are in
// k8s.io/apiserver CEL cost units (roughly one unit per visited value; see
// k8s.io/apiserver/pkg/apis/cel/config.go for the API server's own limits, which these sit
// below because our inputs are small).
type Limits struct {
	// StaticCostLimit rejects, at compile time, an expression whose estimated worst-case cost
	// over the declared input bounds exceeds it. The per-call limit applies too: an
	// expression is refused when its estimate exceeds either, so that one that compiles
	// cannot be stopped at run time on an input within the bounds (which Decide enforces).
	StaticCostLimit uint64
	// PerCallCostLimit stops one expression evaluation with an error when exceeded.
	PerCallCostLimit uint64
	// InterfaceCostBudget is the runtime cost the expressions of the enforced policies
	// (Enforce policies with failurePolicy Fail, the built-in default, the safety policy) may
	// spend on one interface together; past it the evaluation is an error of the policy whose
	// expression crossed it. A policy whose estimates sum beyond it is refused.
	InterfaceCostBudget int64
	// TrialCostBudget is the runtime cost the trial policies — Audit policies, failurePolicy
	// Ignore policies, and everything an Audit record re-evaluates — may spend on one
	// interface together, apart from InterfaceCostBudget so that they never spend what an
	// enforced policy needs; past it the evaluation is an error of the trial policy that
	// crossed it (passed over, or recorded in its Audit record). The work on one interface is
	// bounded by the two budgets together.
	TrialCostBudget int64
	// Deadline bounds the wall time of one interface evaluation; comprehensions check it every
	// CheckFrequency iterations.
	Deadline time.Duration
	// CheckFrequency is how many comprehension iterations run between interrupt checks.
	CheckFrequency uint
	// ComprehensionRange bounds the elements one comprehension (all, exists, map, filter, …)
	// may iterate over, by its range's bound derived at compile time; an expression with a
	// longer range, or one of no derivable size, is refused. cel-go's run-time cost tracker
	// keeps a stack of the values it observes that grows by an entry or two each iteration
	// until the comprehension ends, and searches it on most steps (interpreter/runtimecost.go,
	// refValStack.drop: a linear scan for IDs it does not find), so a comprehension's work
	// grows with the square of its iterations while it is charged linearly:
	// `lists.range(24996).all(i, true)` was admitted at 93,711 units and took ~1 s of CPU
	// (issue #15). At 512 elements a unit costs about what the construct the budgets are
	// calibrated on costs (BenchmarkCostCalibration "long-comprehension" 331–495 ns/unit,
	// "map-building" 352–435, beside a fuzzer); 256 labels or holders, and two such lists
	// concatenated, fit.
	ComprehensionRange uint64
}

// DefaultLimits are the limits used unless a caller passes others. The per-call limit is a
// tenth of the API server's PerCallLimit: on this project's 2-core reference machine 1e6 units
// over dynamic data took ~0.9 s (../shared/CEL.md), far too long for one interface. The cost
// limits bound the CPU work deterministically; the deadline is only the safety net for what
// they miss, and it measures wall time, which includes waiting for a CPU: at 100 ms a
// starved process (CI running API servers beside the tests) failed a normal ~100 µs decision
// with "operation interrupted", so it is 1 s.
//
// The budgets are calibrated so that the cost limits, not the deadline, stop every admitted
// policy on an input within the bounds — so that the outcome is the same every run: the
// construct that does the most work per unit (building a map in a comprehension, ~320 ns
// per unit on the reference machine, BenchmarkCostCalibration) spends both budgets
// together (600,000 units) in ~200 ms, a fifth of the deadline; at 1,000,000 units each it
// took up to the whole deadline, and a policy near the budget decided, hit the budget or hit
// the deadline from run to run. The built-in default's expressions are estimated at ~1,800
// units, the safety policy's at ~1,900.
var DefaultLimits = Limits{
	StaticCostLimit:     100_000,
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

// staticLimit is the limit an expression's estimated cost is checked against: the lower of
// StaticCostLimit and PerCallCostLimit, and which one it is (for the error).
func (l Limits) staticLimit() (uint64, string) {
	if l.PerCallCostLimit <= l.StaticCostLimit {
		return l.PerCallCostLimit, "per-call"
	}
	return l.StaticCostLimit, "static"
}
