package cost

import (
	"strings"
	"testing"
)

// BenchmarkGuardedCallsAtTheirBounds times one call of each guarded kind just within its
// bound, on the worst input for it: the longest a call cel-go cannot interrupt may take, which
// must stay well under a quarter of the deadline (250 ms: Decide's grace before it abandons
// an evaluation). Run: go test ./evaluator/internal/cost -run '^$' -bench GuardedCalls.
func BenchmarkGuardedCallsAtTheirBounds(b *testing.B) {
	c := testConfig()
	c.PerCallLimit = 1 << 62 // the guards, not the cost limit, are timed
	env, deepEnv := testEnv(b, c), testEnv(b, testConfig())
	doublings := "vm.holders.map(h, [h])" + strings.Repeat(".map(x, [x, x])", 4)
	a := strings.Repeat("a", 200_000)
	cases := []struct {
		name, expr string
		vm         testVM
	}{
		// (16384 - 4096 + 1) × 4096 ≈ 2^25.6 rune comparisons, each failing at the needle's end.
		{"indexOf", "vm.name.indexOf(vm.annotations['n']) >= 0",
			testVM{Name: strings.Repeat("a", 16384), Annotations: map[string]string{"n": strings.Repeat("a", 4095) + "b"}}},
		// 34,000 characters × a 120-instruction program ≈ 2^21.96 steps, no match.
		{"regex", "vm.annotations['a'].substring(0, 34000).matches('(a|b){39}c')", testVM{Annotations: map[string]string{"a": a}}},
		// format.uri's regex (1,103) × 3,800 characters ≈ 2^22.
		{"validate", "format.uri().validate(vm.annotations['a'].substring(0, 3800)).hasValue()", testVM{Annotations: map[string]string{"a": a}}},
		// 1,300 strings of 200,000 characters, each equal to x but for its last: ≈ 2^28 compared.
		{"in-list", "vm.annotations['x'] in vm.holders", testVM{Annotations: map[string]string{"x": a + "x"},
			Holders: repeated(a+"y", 1300)}},
		{"sort", "vm.holders.sort().size() > 0", testVM{Holders: descending(MaxSortElements)}},
		{"join", "vm.holders.join(',').size() > 0", testVM{Holders: repeated(strings.Repeat("j", 999), 1000)}},
		{"format-floats", "'" + strings.Repeat("%.100f ", MaxFloatClauses) + "'.format(" + floats(MaxFloatClauses) + ").size() > 0", testVM{}},
		// Two lists of 256 × 4 doublings, ~24,500 nodes each, charged together within what the
		// default per-call limit (100,000) lets one expression spend, walked in full.
		{"deep-equality", doublings + " == " + doublings, testVM{Holders: repeated("h", 256)}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			env := env
			if tc.name == "deep-equality" {
				env = deepEnv
			}
			if _, _, err := eval(b, env, tc.expr, tc.vm); err != nil {
				b.Fatalf("%s: %v, want it within its bound", tc.name, err)
			}
			for b.Loop() {
				_, _, _ = eval(b, env, tc.expr, tc.vm)
			}
		})
	}
}

func repeated(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// descending is n distinct strings in descending order.
func descending(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat("z", (n-i)%7) + string(rune('a'+(n-i)%26)) + strings.Repeat("k", i%5)
	}
	return out
}

// floats is a CEL list literal of n doubles.
func floats(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("1.5e300, ", n), ", ") + "]"
}
