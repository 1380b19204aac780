package evaluator_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// A regex's work is its input's length times its compiled program's size, and compiling it
// takes memory in proportion to that program: the pattern's text says neither. Before, a
// 4.9 KB literal of repeated \pL{1000} compiled in ~0.9 s and ~373 MB when the policy was
// checked, `a{100}x` on a 250 KB annotation passed the estimate and ran for seconds, and a
// pattern read from the input was compiled at run time whatever its size.
func TestRegexPatternsAreBoundedBeforeCompiling(t *testing.T) {
	c := newCompiler(t)
	huge := strings.Repeat(`[\\pL\\pN]{1000}`, 300)
	for _, tc := range []struct{ expr, want string }{
		{"'aaaa'.matches('" + huge + "')", "matches(): pattern"},
		{"'aaaa'.matches('(?i)" + strings.Repeat(`\\pL{200}`, 20) + "')", "matches(): pattern"},
		{"'aaaa'.matches('a{1000}x')", "repetition count 1000, at most 256"},
		{"matches('aaaa', '(ab{30}){30}')", "at most 1000"},
		{"'aaaa'.find('" + strings.Repeat("abcdefgh", 200) + "') != ''", "find(): pattern"},
		{"'aaaa'.matches(vm.annotations['p'])", "the pattern of matches() must be a string literal"},
		{"vm.name.findAll(vm.name).size() > 0", "the pattern of findAll() must be a string literal"},
		{"matches('aaaa', vm.name)", "the pattern of matches() must be a string literal"},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, errs := c.Compile(newPolicy("p", matchCondition("m", tc.expr)), nil)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%.60s: errors %v, want one naming %q", tc.expr, errs, tc.want)
		}
		// Generous: compiling the refused program took ~0.9 s and hundreds of MB.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%.60s: compiling allocated %d MB (took %v), want it refused before the program is built", tc.expr, alloc>>20, took)
		}
	}
	// Stored expressions are guarded too: a stored policy is compiled on every start.
	p := newPolicy("p", matchCondition("m", "'aaaa'.matches('"+huge+"')"))
	if _, errs := c.Compile(p, p); len(errs) != 1 {
		t.Errorf("stored huge pattern: errors %v, want one", errs)
	}
}

// A regex call runs only when its input's length times its program's size is within
// cost.MaxRegexSteps (2^22): Go's regexp may do that much work in the worst case and cel-go
// cannot interrupt a call. `a{100}x` is 6 characters but ~100 instructions: on a 256 KiB
// annotation the call fails closed before it runs, naming the function; the same pattern on a
// name, or a small pattern on the annotation, runs.
func TestRegexWorkIsBoundedBeforeItRuns(t *testing.T) {
	c := newCompiler(t)
	in := withAnnotation(strings.Repeat("a", 256*1024))
	in.VM.Name = strings.Repeat("a", 250)
	for _, tc := range []struct {
		expr    string
		refused bool
	}{
		{"vm.annotations['a'].matches('a{100}x')", true},
		{"vm.annotations['a'].find('.{200}x') != ''", true},
		{"vm.annotations['a'].findAll('(a|b){40}').size() > 0", true},
		{"vm.name.matches('a{100}x')", false},
		{"vm.annotations['a'].matches('^[a-z]+$')", false},
		{"vm.name.findAll('[a-z]+', 3).size() < 3", false},
	} {
		d := decide(setOf(t, c, newPolicy("p", matchCondition("m", tc.expr))), in)
		refused := d.Reason == evaluator.ReasonPolicyError && strings.Contains(d.Message, "against a program of") &&
			strings.Contains(d.Message, "at most 4194304")
		if refused != tc.refused || (!tc.refused && d.Reason == evaluator.ReasonPolicyError) {
			t.Errorf("%s: decision %s %q, want refused before running = %v", tc.expr, d.Reason, d.Message, tc.refused)
		}
	}
}
