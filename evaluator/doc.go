// Package evaluator compiles ClusterIPAMPolicies to CEL programs and evaluates them into one
// typed Decision per VM interface.
//
// It is pure: plain Go input in (Input, built by the controller, the dry-run endpoint or
// ipamctl from whatever objects they have), a Decision out; no client, no HTTP, no logging.
// The one evaluator serves all three callers so their answers cannot drift apart.
//
// Layers, as in Kubernetes' CEL admission: the environment (env.go) is built once from
// k8s.io/apiserver's base environment at a pinned language version with the inputs declared as
// typed CEL objects (input.go; maps iterate in key order, ordered.go); Compile (compile.go)
// turns one policy generation into programs, type-checking every expression, estimating its
// worst-case cost and reporting errors as a field.ErrorList with paths such as
// spec.skipRules[2].messageExpression; a Set (set.go, run.go) is an immutable, ordered
// snapshot of compiled policies, the built-in default last, whose Decide layers them for one
// interface under the semantics of DESIGN.md §3.3 (allocation and hotplug by the first policy
// that sets them, skip rules accumulated and replaced by name), with the limits of limits.go,
// then applies the safety policy compiled from safety.yaml (safety.go), records which policy
// decided each part (Provenance) and explains itself in a Trace (trace.go). Lint (lint.go)
// warns about what compiles but is probably not meant.
//
// Policy test suites, which pair inputs with expected decisions in YAML, are the sub-package
// policytest.
package evaluator
