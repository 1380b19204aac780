package cost

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The reproductions of docs/CEL-LIBRARY.md's upstream accounting issues, against the plain
// Kubernetes environment (none of this package's guards or charges): each reports the cost
// cel-go charged and the time the evaluation took, which grow apart. Run:
//
//	go test ./evaluator/internal/cost -run '^$' -bench Upstream -benchtime 3x

// plainEval compiles src in the Kubernetes base environment of language version 1.37 with `s`
// and `t`, lists of strings, declared, and evaluates it on them with a per-call limit out of
// the way.
func plainEval(b *testing.B, src string, s, t []string) (cost uint64, took time.Duration) {
	b.Helper()
	set, err := environment.MustBaseEnvSet(version.MajorMinor(1, 37)).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{cel.Variable("s", cel.ListType(cel.StringType)),
			cel.Variable("t", cel.ListType(cel.StringType))},
		ProgramOptions: []cel.ProgramOption{cel.CostLimit(1 << 62)},
	})
	if err != nil {
		b.Fatal(err)
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		b.Fatal(err)
	}
	checked, iss := env.Compile(src)
	if iss.Err() != nil {
		b.Fatal(iss.Err())
	}
	prg, err := env.Program(checked)
	if err != nil {
		b.Fatal(err)
	}
	act, err := interpreter.NewActivation(map[string]any{"s": s, "t": t})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	_, det, err := prg.Eval(act)
	took = time.Since(start)
	if err != nil {
		b.Fatalf("%.80s: %v", src, err)
	}
	return *det.ActualCost(), took
}

// report runs src b.N times and reports its charged cost and the time a unit took.
func report(b *testing.B, src string, s, t []string) {
	var cost uint64
	var total time.Duration
	for b.Loop() {
		c, took := plainEval(b, src, s, t)
		cost, total = c, total+took
	}
	b.ReportMetric(float64(cost), "units")
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N)/float64(max(cost, 1)), "ns/unit")
}

// The cost tracker's value stack grows with a comprehension's iterations and is searched on
// most steps: the work per iteration grows with the iterations, the charge does not.
func BenchmarkUpstreamQuadraticTrackerStack(b *testing.B) {
	for _, n := range []int{1000, 5000, 25000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { report(b, fmt.Sprintf("lists.range(%d).all(i, true)", n), nil, nil) })
	}
}

// `a + b` on lists is a lazy chain charged one unit: every read of an element walks the chain,
// so a list concatenated k times reads in time k per element for a charge of k.
func BenchmarkUpstreamLazyListConcatenation(b *testing.B) {
	for _, k := range []int{2, 32, 128} {
		l := "(" + strings.TrimSuffix(strings.Repeat("s + ", k), " + ") + ")"
		b.Run(fmt.Sprint(k), func(b *testing.B) { report(b, l+" == "+l, repeated("x", 500), nil) })
	}
}

// Equality of nested lists is charged by the top-level size but compares every node: k
// map(x, [x, x]) steps reuse one inner list and hold 2^k elements for a charge of ~k.
func BenchmarkUpstreamDeepEqualityChargedByTopLevelSize(b *testing.B) {
	for _, k := range []int{10, 16, 20} {
		z := "[[1, 2]]" + strings.Repeat(".map(x, [x, x])", k)
		b.Run(fmt.Sprint(k), func(b *testing.B) { report(b, z+" == "+z, nil, nil) })
	}
}

// sets.intersects and sets.contains are charged a unit per pair of elements whatever the
// elements hold: two lists of long strings, each equal to every string of the other but for
// its last character, compare every character of every pair.
func BenchmarkUpstreamPerComparisonSetCharges(b *testing.B) {
	for _, n := range []int{10, 10_000, 256 << 10} {
		long := strings.Repeat("a", n)
		s, t := distinctCopies(long+"b", 128), distinctCopies(long+"c", 128)
		b.Run(fmt.Sprint(n), func(b *testing.B) { report(b, "sets.intersects(s, t)", s, t) })
	}
}

// distinctCopies is n copies of s in n allocations (Go compares strings sharing one pointer in
// constant time).
func distinctCopies(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Clone(s)
	}
	return out
}
