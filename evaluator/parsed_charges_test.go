package evaluator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
)

// The methods of a parsed url() or semver() value were charged 1 whatever the value, though
// several redo work that grows with it on every call: getQuery() parses the query again and
// builds a map of it (~31–150 µs a call on 2,040 characters), compareTo() walks the
// pre-release identifiers (~0.6 ms on 90,000 of them); a value held in a variable is parsed
// once and used many times (issue #15, tester atk7 finding 2). Each is charged by the value's
// size now (parsed_charges.go): the cost of a loop calling one grows with the annotation the
// value was parsed from. Class: a method of a parsed library value charged as a constant
// accessor though its work grows with the value.
func TestParsedValueMethodsChargedBySize(t *testing.T) {
	const loops = 50
	query := "https://example.com/p?" + strings.Repeat("k=v&", 500) + "k=v" // 2,021 characters, 501 parameters
	path := "https://example.com/" + strings.Repeat("a b/", 500)            // 2,020 characters
	pre := "1.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 509), ".")    // 509 identifiers, 1,023 characters (maxSemverLength 1,024)
	c := compilerWith(t, evaluator.Limits{StaticCostLimit: 1e9, PerCallCostLimit: 1e9,
		InterfaceCostBudget: 1e9, TrialCostBudget: 1e9, Deadline: 30 * time.Second})
	for _, tc := range []struct {
		name, parse, call, short, long string
		more                           int64 // at least this much more a call on long than on short
	}{
		{"getQuery", "url", "variables.v.getQuery().size() < 0", "https://x/?a=b", query, 2 * 501},
		{"getEscapedPath", "url", "variables.v.getEscapedPath() == ''", "https://x/a", path, 2020 / 10},
		{"getHostname", "url", "variables.v.getHostname() == ''", "https://x/", "https://" + strings.Repeat("h", 2000) + ":80/", 2000 / 10},
		{"url ==", "url", "variables.v == url('https://y/')", "https://x/a", path, 2 * 2020 / 10},
		{"compareTo", "semver", "variables.v.compareTo(variables.v) != 0", "1.0.0-a", pre, 45},
		{"isLessThan", "semver", "variables.v.isLessThan(variables.v)", "1.0.0-a", pre, 45},
		{"semver ==", "semver", "variables.v != variables.v", "1.0.0-a", pre, 45},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The value is parsed once, when the rule first reads it: the loop of one call is
			// subtracted, so that what remains is the other calls' charge.
			cost := func(value string, n int) int64 {
				s := setOf(t, c, newPolicy("p", variable("v", tc.parse+"(vm.annotations['a'])"),
					skipRule("r", fmt.Sprintf("lists.range(%d).exists(i, %s)", n, tc.call), "R", "", "")))
				in := pooledAuto()
				in.VM.Annotations = map[string]string{"a": value}
				d := decide(s, in)
				if d.Reason == evaluator.ReasonPolicyError || d.Skip {
					t.Fatalf("decision = %s %q, want the rule evaluated to false", d.Reason, d.Message)
				}
				return d.Cost
			}
			short := cost(tc.short, loops) - cost(tc.short, 1)
			long := cost(tc.long, loops) - cost(tc.long, 1)
			if want := (loops - 1) * tc.more; long-short < want {
				t.Errorf("%d calls cost %d on the long value, %d on the short: want at least %d more, the calls' work",
					loops-1, long, short, want)
			}
		})
	}
}

// Realistic uses stay admitted with the default limits: a URL's host and query in a rule
// over the holders, versions compared, a name looked up as a format.
func TestParsedValueMethodsRealisticUsesAdmitted(t *testing.T) {
	c := newCompiler(t)
	for _, expr := range []string{
		"holders.vms.exists(h, url('https://' + h + '/x?y=z').getHost() == vm.name)",
		"isURL(vm.annotations[?'u'].orValue('')) && url(vm.annotations['u']).getQuery().size() > 0 && url(vm.annotations['u']).getEscapedPath() != ''",
		"semver(vm.labels[?'v'].orValue('0.0.0')).isGreaterThan(semver('1.2.3')) && semver('1.2.3-rc.1') != semver('1.2.3')",
		"holders.vms.exists(h, semver(vm.labels[?'v'].orValue('0.0.0'), true).compareTo(semver(vm.labels[?'w'].orValue('0.0.0'), true)) < 0)",
		"format.named('dns1123Label').hasValue()",
	} {
		if errs := compileRule(c, expr); len(errs) != 0 {
			t.Errorf("%s: Compile errors = %v, want it admitted", expr, errs)
		}
	}
}

// A variable holding a parsed value is declared dyn; its methods and comparisons are
// estimated by the text it was parsed from all the same: the tester's loops over a
// 2,040-character URL's query and a 90,000-identifier version, admitted before and stopped
// at run time, are refused when written; a few calls stay admitted.
func TestParsedValueVariablesEstimated(t *testing.T) {
	c := newCompiler(t)
	query := "https://h/?" + strings.TrimSuffix(strings.Repeat("k=&", 676), "&")
	for _, tc := range []struct {
		v, rule string
		refused bool
	}{
		{"url('" + query + "')", "lists.range(512).all(i, variables.v.getQuery().size() > 0)", true},
		{"url('" + query + "')", "lists.range(2).all(i, variables.v.getQuery().size() > 0)", false},
		{"url('https://h/' + vm.annotations[?'p'].orValue(''))", "lists.range(512).all(i, variables.v.getEscapedPath() != '')", true},
		// A version is parsed from at most maxSemverLength (1,024) characters: 64 comparisons of
		// one are cheap (~54 units each), 64 × 64 are not.
		{"semver('1.0.0-' + vm.annotations[?'p'].orValue('a'))", "lists.range(64).all(i, variables.v.compareTo(variables.v) == 0)", false},
		{"semver('1.0.0-' + vm.annotations[?'p'].orValue('a'))", "lists.range(64).all(i, lists.range(64).all(j, variables.v.compareTo(variables.v) == 0))", true},
		{"semver('1.0.0-' + vm.annotations[?'p'].orValue('a'))", "lists.range(64).all(i, lists.range(64).all(j, variables.v == variables.v))", true},
		{"semver(vm.labels[?'v'].orValue('1.0.0'))", "lists.range(64).all(i, variables.v == variables.v && variables.v.isLessThan(semver('2.0.0')))", false},
	} {
		_, errs := c.Compile(newPolicy("p", variable("v", tc.v), skipRule("r", tc.rule, "R", "", "")), nil)
		refused := len(errs) == 1 && strings.Contains(errs[0].Error(), "estimated worst-case cost")
		if refused != tc.refused || (!tc.refused && len(errs) != 0) {
			t.Errorf("%s over %.40s…: Compile errors = %v, want refused %v", tc.rule, tc.v, errs, tc.refused)
		}
	}
}

// What a URL's accessors return is bounded by its text: a variable keeping a part of a URL
// variable is admitted (the URL variable is sized by its text now, which alone would hold
// such a variable to the fixed bound and refuse it).
func TestURLPartsVariablesAdmitted(t *testing.T) {
	c := newCompiler(t)
	_, errs := c.Compile(newPolicy("p", variable("u", "url(vm.annotations[?'endpoint'].orValue('https://x/'))"),
		variable("h", "variables.u.getHost()"), variable("q", "variables.u.getQuery()"),
		variable("p", "variables.u.getEscapedPath()"),
		skipRule("r", "variables.h == 'x' && 'a' in variables.q && variables.p != ''", "R", "", "")), nil)
	if len(errs) != 0 {
		t.Errorf("Compile errors = %v, want the policy admitted", errs)
	}
}
