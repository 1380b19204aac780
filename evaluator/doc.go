// Package evaluator compiles ClusterIPAMPolicies to CEL programs and evaluates them into one
// typed Decision per VM interface.
//
// It is pure: plain Go input in (Input, built by the controller, the dry-run endpoint or
// ipamctl from whatever objects they have), a Decision out; no client, no HTTP, no logging.
// The one evaluator serves all three callers so their answers cannot drift apart.
//
// Layers, as in Kubernetes' CEL admission: the environment (env.go) is built once from
// k8s.io/apiserver's base environment at a pinned language version, with the inputs declared
// as typed CEL objects (input.go; maps iterate in key order, ordered.go and map_order.go) and
// the cost model's guards and limits (internal/cost); Compile (compile.go, expr.go) turns one
// policy generation into programs, each expression through a short pipeline — parse and
// type-check within the compile-work bounds, accept its shape and result type, estimate its
// cost, plan it — reporting errors as a field.ErrorList with paths such as
// spec.skipRules[2].messageExpression, and warnings (Policy.Warnings, Lint) for what compiles
// but deserves an admin's eye; a Set (set.go, run.go) is an immutable, ordered snapshot of
// compiled policies, the built-in default last, whose Decide layers them for one interface
// under the semantics of DESIGN.md §3.3 (allocation and hotplug by the first policy that sets
// them, skip rules accumulated and replaced by name) within the limits of limits.go, then
// applies the safety policy compiled from safety.yaml (safety.go), records which policy
// decided each part (Provenance) and explains itself in a Trace (trace.go).
//
// What an evaluation may cost is internal/cost's business; docs/PROTECTION.md says which
// mechanism guarantees what. Whatever a policy does, Decide answers by its deadline and a
// quarter, and a failure is a PolicyError with AllocationUnknown, which the caller turns into
// "keep what is applied". The errors a policy's mode or failurePolicy kept from deciding (an
// Ignore policy passed over, an Audit policy's failing record) are in Trace.Failures even
// without Options.Explain, for the caller to count.
//
// Policy test suites, which pair inputs with expected decisions in YAML, are the sub-package
// policytest.
package evaluator
