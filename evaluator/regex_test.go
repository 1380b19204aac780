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

// The estimate charges a regex call its input's bound times its program's size: `a{100}x`
// is 6 characters but 100 instructions, too many for a 256 KiB annotation; the same pattern
// on a name (253 characters) and a small pattern on an annotation compile.
func TestRegexCostIsInputTimesProgram(t *testing.T) {
	c := newCompiler(t)
	// The string may be a call result the checker cannot size (trim, lowerAscii): it is
	// bounded by the largest string, not left to the library's pattern-length formula (which
	// let the first two through); a literal by its own length (800 × '(?i)\pL{20}' on 'a').
	for _, refused := range []string{"'p' in vm.annotations && vm.annotations['p'].matches('a{100}x')",
		"'p' in vm.annotations && vm.annotations['p'].trim().matches('.{200}x')",
		"'p' in vm.annotations && vm.annotations['p'].lowerAscii().find('.{200}x') != ''",
		"lists.range(1200).exists(i, 'a'.matches('(?i)\\\\pL{20}'))"} {
		_, errs := c.Compile(newPolicy("p", matchCondition("m", refused)), nil)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
			t.Errorf("%.120s: errors %v, want the estimate refused", refused, errs)
		}
	}
	for _, ok := range []string{"vm.name.matches('a{100}x')", "matches(vm.name, '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
		"'p' in vm.annotations && vm.annotations['p'].matches('^[a-z]+$')",
		"vm.name.find('[0-9]{1,3}') != ''", "vm.name.findAll('[a-z]+', 3).size() < 3"} {
		if _, errs := c.Compile(newPolicy("p", matchCondition("m", ok)), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want it to compile", ok, errs)
		}
	}
}

// At run time a regex call is charged the same: the longer the input, the higher the cost
// (before, a 9-character pattern cost the same on 250 characters as on 25).
func TestRegexRuntimeCostGrowsWithProgram(t *testing.T) {
	c := newCompiler(t)
	cost := func(pattern string) int64 {
		in := pooledAuto()
		in.VM.Name = strings.Repeat("a", 250)
		d := decide(setOf(t, c, newPolicy("p", matchCondition("m", "vm.name.matches('"+pattern+"')"))), in)
		if d.Reason == evaluator.ReasonPolicyError {
			t.Fatalf("%s: %s", pattern, d.Message)
		}
		return d.Cost
	}
	small, large := cost("ax"), cost("a{100}x")
	if large < small+25*20 {
		t.Errorf("cost of a{100}x %d, of ax %d: want the 100-instruction program charged ~25× per character", large, small)
	}
}
