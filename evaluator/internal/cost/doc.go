// Package cost bounds what a policy's CEL expressions may cost the process that evaluates
// them: the controller, the dry-run API, ipamctl. docs/PROTECTION.md is the table of what is
// guaranteed, by which mechanism, with which number and which test.
//
// # The model
//
// The guarantee is the run time's, whatever an expression is: nothing it does can stall its
// caller, and an evaluation that trips a limit fails closed (the evaluator turns the failure
// into a PolicyError that changes nothing applied). Four layers, each simple:
//
//  1. Admission sanity (Estimate, Refusal, Warning, Precheck, LiteralErrors): an expression
//     is parsed and type-checked within compile-work bounds (the nesting MaxNestingDepth, the
//     type depth MaxTypeDepth, the checker's work CheckWork within MaxPolicyCheckWork, a
//     policy's source MaxPolicySourceBytes), its regex patterns must be bounded literals, and
//     cel-go's and the Kubernetes library's estimate over the declared input bounds refuses
//     what is obviously unbounded (StaticLimit, ten times the per-call limit, as Kubernetes
//     refuses CRD rules) and warns above PerCallLimit. The estimate is no promise: what it
//     cannot size it assumes UnknownSize long.
//  2. Run-time bounds (Options' program options, and the evaluator's accounts and
//     deadlines): the per-call cost limit as cel-go and the libraries charge, checked as the
//     charges accrue; the evaluation's context, checked between comprehension iterations and,
//     every CheckFrequency, before calls (interruptible); a comprehension's range
//     (RangeError). A cost unit is no fixed CPU time: the wall-clock deadline bounds the CPU.
//  3. Guards for work cel-go cannot interrupt (one call) or does not see: each guarded call
//     checks its arguments before the library runs and fails closed past a bound —
//     value-dependent parses (quantity, ip, cidr, url, semver), format() precision, float
//     clauses and output, replace() and join() output, string searches, regex programs and
//     their input (regexOptimizations), format validators, sort(), time-zone loads (loaded
//     once), and the comparing operations on nested values and long strings (deep.go: a
//     pre-walk bounded by the per-call limit, charged by what it walks). List `+` builds a flat
//     list (concat.go), charged by what it copies, as format() is by what it renders.
//  4. Input bounds (Bounds, Checks): an input field a policy reads is held to its maxSize and
//     elemMaxSize tags before the policy runs.
//
// # The seam
//
// The evaluator calls Config.Options for its environment and program options, Precheck and
// NestingError while compiling, LiteralErrors, Estimate, Refusal and Warning for each new
// expression, InputReads and Bounds for the fields a policy reads, Checks at run time, and
// RangeError on each comprehension range it plans. Nothing here knows about policies.
//
// # Upgrading cel-go, k8s.io/apiserver or the language version
//
//  1. Run TestEveryOverloadIsClassified: a function or overload the environment gained must
//     be classified (classify_test.go) — guarded (a bound here), charged (cel-go or the
//     library charges its work, which is linear in values the other bounds hold), or
//     unusable — after reading its implementation for work that grows with a value rather
//     than a length, or that one call does without charging.
//  2. Check that every guard still wraps its overload (Options fails when one is missing),
//     that regexOptimizations still replace the library's (a regex test fails otherwise), and
//     that the decorators still see calls as interpreter.InterpretableCall.
//  3. Re-run the accounting reproductions of docs/CEL-LIBRARY.md ("Upstream accounting
//     issues"): a fixed one may let a guard go.
//  4. Run the fuzzers (make fuzz) and the benchmarks (BenchmarkDecideDefault against bare
//     cel-go with the same limits).
package cost
