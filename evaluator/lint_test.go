package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func TestLintWarnsAboutAMessageThatLooksLikeCEL(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		message string
		warn    bool
	}{
		{"'IPAddress ' + ipAddress.name + ' is missing'", true},
		{"interface.ipAddressName", true},
		{"IPAddress is missing", false},
		{"static address outside 10.0.0.0/8", false},
		{"'a quoted sentence'", false},
		{"", false},
	}
	for _, tc := range cases {
		t.Run(tc.message, func(t *testing.T) {
			w := c.Lint(newPolicy("p", skipRule("r", "false", "R", tc.message, "")))
			if got := len(w) == 1 && w[0].Field == "spec.skipRules[0].message"; got != tc.warn || len(w) > 1 {
				t.Errorf("warnings = %v, want a warning: %v", w, tc.warn)
			}
		})
	}
}

func TestLintWarnsAboutAbsentKeysUnderIgnoreOnly(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		name string
		expr string
		warn bool
	}{
		{"an index into labels", "vm.labels['team'] == 'a'", true},
		{"a select on annotations", "vm.annotations.owner == 'a'", true},
		{"an index into a variable's map", "{'a': 1}['b'] == 1", true},
		{"has() guards", "has(vm.labels.team) && vm.labels.team == 'a'", false},
		{"in guards", "'team' in vm.labels && vm.labels['team'] == 'a'", false},
		{"an optional index", "vm.labels[?'team'].orValue('') == 'a'", false},
		{"an optional select", "vm.labels.?team.orValue('') == 'a'", false},
		{"a field of an input object", "network.ready", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ignore := c.Lint(newPolicy("p", ignoreErrors, matchCondition("m", tc.expr)))
			if got := len(ignore) == 1 && ignore[0].Field == "spec.matchConditions[0].expression" &&
				strings.Contains(ignore[0].Message, "has(m.k)"); got != tc.warn {
				t.Errorf("under Ignore: warnings = %v, want one: %v", ignore, tc.warn)
			}
			if fail := c.Lint(newPolicy("p", matchCondition("m", tc.expr))); len(fail) != 0 {
				t.Errorf("under Fail: warnings = %v, want none (an error is a PolicyError, not silence)", fail)
			}
		})
	}
}

// Lint shows what compiling warned about: an expression estimated beyond the per-call limit
// it runs under (admitted: the run time stops it on inputs near the declared bounds).
func TestLintWarnsAboutAnEstimateBeyondThePerCallLimit(t *testing.T) {
	c := newCompiler(t)
	expr := "vm.annotations['a'].lowerAscii().upperAscii().lowerAscii().upperAscii() == 'x'"
	w := c.Lint(newPolicy("p", matchCondition("m", expr)))
	if len(w) != 1 || w[0].Field != "spec.matchConditions[0].expression" || !strings.Contains(w[0].Message, "exceeds the per-call limit 100000") {
		t.Errorf("warnings = %v, want one naming the per-call limit at the expression", w)
	}
	if w := c.Lint(newPolicy("p", matchCondition("m", "vm.annotations['a'].lowerAscii() == 'x'"))); len(w) > 0 {
		t.Errorf("warnings = %v for an expression within the limit, want none", w)
	}
}

func TestShippedPoliciesLintClean(t *testing.T) {
	c := newCompiler(t)
	all, err := policies.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	for i := range all {
		if w := c.Lint(&all[i]); len(w) != 0 {
			t.Errorf("%s: %v", all[i].Name, w)
		}
	}
}

func TestReplacedRulesNameBothRules(t *testing.T) {
	def, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	early := newPolicy("early", priority(10), skipRule("static-missing", "false", "Off", "", ""), skipRule("own", "false", "Own", "", ""))
	late := newPolicy("late", priority(2000), skipRule("own", "true", "Late", "", ""))
	w := evaluator.ReplacedRules(early, []v1alpha1.ClusterIPAMPolicy{*late})
	want := []string{
		`spec.skipRules[0].name: rule "static-missing" of this policy (priority 10) replaces rule "static-missing" of policy builtin:default (priority 1000) wherever both match`,
		`spec.skipRules[1].name: rule "own" of this policy (priority 10) replaces rule "own" of policy late (priority 2000) wherever both match`,
	}
	if got := warningStrings(w); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	w = evaluator.ReplacedRules(late, []v1alpha1.ClusterIPAMPolicy{*early, *def})
	want = []string{`spec.skipRules[0].name: rule "own" of policy early (priority 10) replaces rule "own" of this policy (priority 2000) wherever both match`}
	if got := warningStrings(w); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings = %v, want %v", got, want)
	}
}

func warningStrings(ws []evaluator.Warning) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}

// BenchmarkLintWorstCase lints issue #15's lint attack: 60 skip rules whose static messages
// are ~1,000 characters of generic CEL, each costly to type-check (3.1–3.5 s of CPU on the
// webhook while each message had an account of its own).
func BenchmarkLintWorstCase(b *testing.B) {
	c := newCompiler(b)
	for _, term := range []string{"1 in [dyn(1),2]", "1 in [1,dyn(1)]", "dyn(1)+dyn(2)+dyn(3)+dyn(4)==dyn(5)"} {
		msg := term
		for len(msg)+4+len(term) <= 1004 {
			msg += " || " + term
		}
		var opts []policyOption
		for i := range 60 {
			opts = append(opts, skipRule(fmt.Sprintf("r%d", i), fmt.Sprintf("vm.name == 'r%d'", i), "X", msg, ""))
		}
		p := newPolicy("p", opts...)
		b.Run(term, func(b *testing.B) {
			start := cpuNow(b)
			for b.Loop() {
				c.Lint(p)
			}
			reportCPU(b, start)
		})
	}
}

// CompileAndLint, the webhook's single pass, answers what Compile and Lint answer apart: the
// same errors for a policy that does not compile (and no warnings), the same warnings for
// one that does, and the stored version ratchets as Compile's does.
func TestCompileAndLintAgreesWithCompileAndLint(t *testing.T) {
	c := newCompiler(t)
	stored := newPolicy("p", skipRule("r", "vm.labels['team'] == 'a'", "R", "interface.ipAddressName", ""), ignoreErrors)
	for _, tc := range []struct {
		name string
		p    *v1alpha1.ClusterIPAMPolicy
	}{
		{"warnings about a message and an absent key", stored},
		{"type errors", newPolicy("p", skipRule("r", "1 in [1, dyn(1)]", "R", "m", ""))},
		{"clean", newPolicy("p", skipRule("r", "vm.name == 'a'", "R", "m", ""))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, wantErrs := c.Compile(tc.p, stored)
			var wantWarnings []evaluator.Warning
			if len(wantErrs) == 0 {
				wantWarnings = c.Lint(tc.p)
			}
			compiled, errs, warnings := c.CompileAndLint(tc.p, stored)
			if fmt.Sprint(errs) != fmt.Sprint(wantErrs) || fmt.Sprint(warnings) != fmt.Sprint(wantWarnings) || (compiled == nil) != (len(errs) > 0) {
				t.Errorf("CompileAndLint = %v, %v, %v; want errors %v and warnings %v", compiled != nil, errs, warnings, wantErrs, wantWarnings)
			}
		})
	}
	if _, _, w := c.CompileAndLint(stored, nil); len(w) != 2 {
		t.Errorf("warnings = %v, want the message's and the absent key's", w)
	}
}

// A CIDR literal with host bits set is almost always a typo: the library keeps the host bits,
// so cidr('10.10.0.1/16') is not the network 10.10.0.0/16. Lint warns, naming the canonical
// form (issue #29).
func TestLintWarnsAboutACIDRWithHostBits(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct{ expr, want string }{
		{"cidr('10.10.0.1/16').containsIP(ip(ipAddress.address))", `"10.10.0.1/16" has host bits set: it is not the network 10.10.0.0/16`},
		{"cidr('10.0.0.0/8').containsCIDR('10.1.2.3/16')", `write "10.1.0.0/16"`},
		{"cidr('fd00::1/64') == cidr('fd00::/64')", `write "fd00::/64"`},
	} {
		w := c.Lint(newPolicy("p", matchCondition("m", tc.expr)))
		if len(w) != 1 || w[0].Field != "spec.matchConditions[0].expression" || !strings.Contains(w[0].Message, tc.want) {
			t.Errorf("%s: warnings = %v, want one containing %q", tc.expr, w, tc.want)
		}
	}
	for _, ok := range []string{"cidr('10.0.0.0/8').containsIP(ip(ipAddress.address))", "cidr('10.10.0.1/32').ip() == ip('10.10.0.1')",
		"cidr(ipAddress.address + '/24').prefixLength() == 24"} {
		if w := c.Lint(newPolicy("p", matchCondition("m", ok))); len(w) > 0 {
			t.Errorf("%s: warnings = %v, want none", ok, w)
		}
	}
}
