package evaluator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// BenchmarkCostCalibration measures the wall time per CEL cost unit of the constructs that do
// the most work per unit charged, each as the only skip rule of a policy decided by Decide
// (the whole path: cost tracking, limits, lazy variables). It reports ns/unit (wall time of a
// decision over Decision.Cost) and units (the cost charged): the figures that calibrate the
// limits so that the cost budgets, not the deadline, stop every admitted policy
// (docs/CEL-LIBRARY.md, "Calibration"). Run with
//
//	go test ./evaluator -run '^$' -bench CostCalibration -benchtime 20x
//
// It asserts nothing about time; it fails only when a construct stops being admitted or
// decided, so that the figures stay meaningful.
func BenchmarkCostCalibration(b *testing.B) {
	list := func(n int, elem string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(elem+",", n), ",") + "]"
	}
	long := strings.Repeat("a", 250)
	const bigPattern = "[a-z]{240}x" // a bound of 968 instructions, 243 real
	constructs := []struct{ name, expr string }{
		// A short string against the largest program: the regex is compiled on every call.
		// A DNS-name-long string against a large program.
		{"regex-long-literal", list(40, "1") + ".exists(i, '" + long + "'.matches('[a-z]{200}x'))"},
		// The largest program the bounds admit of a repetition.
		{"regex-big-program-short-input", list(400, "1") + ".exists(i, 'a'.matches('" + bigPattern + "'))"},
		{"regex-big-program-long-input", list(40, "1") + ".exists(i, vm.name.matches('" + bigPattern + "'))"},
		{"nested-comprehension", list(100, "1") + ".exists(x, " + list(100, "1") + ".exists(y, x == y + 1))"},
		{"string-concat", list(200, "'"+long+"'") + ".exists(s, (s + s + s + s).size() == 0)"},
		{"string-join", list(100, "1") + ".exists(i, " + list(60, "'"+long[:60]+"'") + ".join(',').size() == 0)"},
		{"string-format", list(800, "1") + ".exists(i, '%s%s'.format([vm.name, vm.name]).size() == 0)"},
		{"list-building", list(80, "1") + ".exists(i, " + list(50, "1") + ".map(x, [x, x]).size() == 0)"},
		{"map-building", list(200, "1") + ".exists(i, " + list(100, "1") + ".transformMap(k, v, v).size() == 0)"},
		{"lower-ascii", list(1000, "vm.name") + ".exists(s, s.lowerAscii().size() == 0)"},
		// The string functions charged for their implementation's work (charges.go): charAt
		// converts the receiver to runes, findAll and split build a string per match or part.
		{"char-at", list(1000, "1") + ".exists(i, vm.name.charAt(i % 250) == '#')"},
		{"index-of", list(1000, "1") + ".exists(i, vm.name.indexOf('ab') == 0)"},
		{"find-all", list(150, "1") + ".exists(i, size(vm.name.findAll('a')) == 0)"},
		{"split", list(300, "1") + ".exists(i, size(vm.name.split('')) == 0)"},
		{"find-all-long", "size(vm.annotations['a'].findAll('a', 30000)) == 0"},
		{"char-at-long", list(3, "1") + ".exists(i, vm.annotations['a'].charAt(i) == '#')"},
		{"replace", list(300, "1") + ".exists(i, size(vm.name.replace('', '-')) == 0)"},
		// The calls charged for their string argument's length or a per-call constant
		// (linear_charges.go): parsing conversions, rune counting, looking a long key up in a
		// map, loading a time zone (by a name absent from the tz database, the slower path,
		// and by a present one).
		{"duration-parse", list(3, "1") + ".exists(i, duration(vm.annotations['d']) == duration('1s'))"},
		// semver's parse allocates per pre-release identifier (guards.go): the longest version
		// it parses, one identifier per two characters.
		{"semver-parse", "lists.range(150).exists(i, !isSemver(vm.annotations['v']))"},
		// A list library traversal of one-character strings: a unit an element (linear_charges.go).
		{"list-search-short", "lists.range(150).exists(i, " + list(250, "'a'") + ".includes(string(i)) && i < 0)"},
		{"double-parse", list(3, "1") + ".exists(i, double(vm.annotations['f']) == 2.0)"},
		{"int-parse", list(3, "1") + ".exists(i, int(vm.annotations['f']) == 2)"},
		// An invalid timestamp is quoted into its error, an invalid bool copied into its
		// (`err && false` is false: the construct decides).
		{"timestamp-invalid", list(3, "1") + ".exists(i, timestamp(vm.annotations['a']) == timestamp('2020-01-01T00:00:00Z') && i < 0)"},
		{"bool-invalid", list(3, "1") + ".exists(i, bool(vm.annotations['a']) && i < 0)"},
		{"size-runes", list(10, "1") + ".exists(i, vm.annotations['u'].size() == 0)"},
		{"map-key-hash", "[{'x': 1}].exists(m, " + list(300, "1") + ".exists(i, vm.annotations['a'] in m))"},
		{"in-list-compare", list(150, "1") + ".exists(i, vm.annotations['a'] in [vm.annotations['b'], vm.annotations['b']])"},
		{"quantity-arithmetic", "[quantity('1e64').add(quantity('1e-64'))].exists(q, " + list(1500, "1") +
			".exists(i, q.add(q).sub(q).isInteger() && q.compareTo(q.add(1)) == 5))"},
		{"time-zone-absent", list(150, "1") + ".exists(i, vm.creationTimestamp.getHours('Nowhere/Zone') == 25 && i < 0)"},
		{"time-zone", list(150, "1") + ".exists(i, vm.creationTimestamp.getHours('Europe/Berlin') == 25)"},
		// A file of the zone directory that is no zone (Debian's 114 KB tzdata.zi): read once
		// per process, then answered from what that load gave (zones.go).
		{"time-zone-not-a-zone", list(150, "1") + ".exists(i, vm.creationTimestamp.getHours('tzdata.zi') == 25 && i < 0)"},
		// Comparing a long string with a short one, charged by the shorter (cel-go's tracker
		// counted both operands' runes on every call: linear_charges.go).
		{"string-compare-long", "lists.range(15).exists(j, lists.range(500).exists(i, vm.annotations['u'] == 'z' || vm.annotations['u'] < 'a'))"},
		// The longest comprehension admitted (Limits.ComprehensionRange): cel-go's tracker
		// searches a stack that grows with the iterations, so its work per unit is highest at
		// the bound.
		{"long-comprehension", "lists.range(12).exists(j, lists.range(512).all(i, true) && j < 0)"},
		// `&&`, `||` and `?:` cel-go charges 0 but its tracker searches its stack for their
		// operands: charged logicalNodeCharge each in a comprehension (deep_bounds.go).
		{"logical-chain", "lists.range(512).exists(i, (" + strings.TrimSuffix(strings.Repeat("true && ", 40), " && ") + ") && i < 0)"},
	}
	c := newCompiler(b)
	in := pooledAuto()
	in.VM.Name = long[:253-3]
	in.VM.Annotations = map[string]string{
		"a": strings.Repeat("a", 70_000),                                   // a match per character
		"d": strings.Repeat("0s", 35_000),                                  // a valid duration, parsed to its end
		"f": strings.Repeat("0", 69_999) + "1",                             // a valid int and double
		"u": strings.Repeat("é", 35_000),                                   // two bytes per rune
		"b": strings.Repeat("a", 69_999) + "b",                             // as long as a, compared to its end
		"v": "1.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 509), "."), // 509 identifiers, 1,023 characters
	}
	for _, k := range constructs {
		b.Run(k.name, func(b *testing.B) {
			p := newPolicy("calibrate", skipRule("construct", k.expr, "PolicyError", "", ""))
			if _, errs := c.Compile(p, p); len(errs) > 0 {
				b.Fatalf("not admitted: %v", errs.ToAggregate())
			}
			set := setOf(b, c, p)
			d := set.Decide(context.Background(), in, evaluator.Options{})
			if d.Reason == evaluator.ReasonPolicyError || d.Cost < 20_000 {
				b.Fatalf("decision = %+v, want no PolicyError, costing at least 20,000 units", d)
			}
			var cost int64
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				cost += set.Decide(context.Background(), in, evaluator.Options{}).Cost
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(cost), "ns/unit")
			b.ReportMetric(float64(cost)/float64(b.N), "units")
		})
	}
}
