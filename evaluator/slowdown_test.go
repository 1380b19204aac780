package evaluator_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// calibratedUnitCPU is the CPU time a cost unit of a reference construct — a comprehension
// building a map on every iteration — takes in the plain test binary on the reference machine
// (~320–380 ns measured); its ratio in this binary scales the fuzz targets' compile-time bound.
const calibratedUnitCPU = 380 * time.Nanosecond

var (
	slowdownOnce  sync.Once
	slowdownValue float64
)

// slowdown is how many times slower this binary evaluates CEL than the plain test binary on
// the reference machine: at least 1. A fuzz binary is built with coverage instrumentation,
// which slows evaluation and compilation several times, so the fuzz targets scale their
// compile-time bound by it, to blame the policy and not the instrumentation. Measured once, as
// the least CPU per unit of three decisions of the reference construct.
func slowdown(t testing.TB) float64 {
	slowdownOnce.Do(func() {
		c := newCompiler(t)
		fifty := "[" + strings.TrimSuffix(strings.Repeat("1,", 50), ",") + "]"
		rule := skipRule("build", fmt.Sprintf("lists.range(250).exists(i, %s.transformMap(k, v, v + i).size() == 0)", fifty), "X", "m", "")
		set := setOf(t, c, newPolicy("reference", noAllocation, rule))
		in := pooledAuto()
		best := time.Duration(0)
		for range 3 {
			var d evaluator.Decision
			took, _ := measure(func() { d = decide(set, in) })
			if d.Cost == 0 {
				t.Fatalf("the reference construct cost nothing: %+v", d)
			}
			if per := took / time.Duration(d.Cost); best == 0 || per < best {
				best = per
			}
		}
		slowdownValue = max(1, float64(best)/float64(calibratedUnitCPU))
		t.Logf("this binary spends %v of CPU per cost unit of the reference construct: slowdown %.1f×", best, slowdownValue)
	})
	return slowdownValue
}

// scaled is d scaled by this binary's slowdown.
func scaled(t testing.TB, d time.Duration) time.Duration {
	return time.Duration(float64(d) * slowdown(t))
}
