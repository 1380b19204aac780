package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// ip(), cidr() and url() quote a rejected argument, Go-escaped, into their errors: each
// zero-width space became six bytes, and six admitted isIP() policies on an 87,000 × U+200B
// annotation spent 0.9-1.6 s and 357-715 MiB on one interface (issue #15, atk15b finding
// 5). An argument longer than any valid one is refused before the library parses it:
// isIP()/isCIDR()/isURL() answer false, ip()/cidr()/url() fail with a short error naming
// the bound. Class: an error path whose work grows with the argument, charged per call.
func TestParsersRefuseOverlongArguments(t *testing.T) {
	zw := strings.Repeat("\u200b", 87_000)
	c := newCompiler(t)
	for _, tc := range []struct{ expr, want string }{
		{"isIP(vm.annotations['a'])", ""},
		{"isCIDR(vm.annotations['a'])", ""},
		{"isURL(vm.annotations['a'])", ""},
		{"ip(vm.annotations['a']).family() == 4", "ip(): argument beyond the bound policies are evaluated with: 261000 characters, at most 45"},
		{"cidr(vm.annotations['a']).prefixLength() == 4", "cidr(): argument beyond the bound policies are evaluated with: 261000 characters, at most 49"},
		{"url(vm.annotations['a']).getHost() == ''", "url(): argument beyond the bound policies are evaluated with: 261000 characters, at most 2048"},
		// The string overloads parse their argument as ip() and cidr() do (each 17.9 and 7.4 ms a
		// call on this annotation, charged 8,705), ip.isCanonical() as ip() (14.2 ms, 17,403).
		{"cidr('::/0').containsIP(vm.annotations['a'])", "containsIP(): argument beyond the bound policies are evaluated with: 261000 characters, at most 45"},
		{"cidr('::/0').containsCIDR(vm.annotations['a'])", "containsCIDR(): argument beyond the bound policies are evaluated with: 261000 characters, at most 49"},
		{"ip.isCanonical(vm.annotations['a'])", "ip.isCanonical(): argument beyond the bound policies are evaluated with: 261000 characters, at most 45"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			s := setOf(t, c, newPolicy("p", skipRule("r", tc.expr, "R", "", "")))
			d := decide(s, withAnnotation(zw))
			if len(d.Message) > 1000 {
				t.Fatalf("message of %d bytes, want the argument not quoted", len(d.Message))
			}
			if tc.want == "" {
				if d.Reason == evaluator.ReasonPolicyError || d.Skip {
					t.Errorf("decision = %s %q, want the rule evaluated to false", d.Reason, d.Message)
				}
				return
			}
			if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, tc.want) {
				t.Errorf("decision = %s %q, want a policy error holding %q", d.Reason, d.Message, tc.want)
			}
		})
	}
	// Valid arguments at the bounds still parse.
	s := setOf(t, c, newPolicy("p", skipRule("r", "ip('0000:0000:0000:0000:0000:ffff:192.168.100.200').family() == 6 && "+
		"cidr('0000:0000:0000:0000:0000:ffff:192.168.100.200/128').prefixLength() == 128 && "+
		"cidr('::/0').containsIP('0000:0000:0000:0000:0000:ffff:192.168.100.200') && "+
		"cidr('::/0').containsCIDR('0000:0000:0000:0000:0000:ffff:192.168.100.200/128') && "+
		"!ip.isCanonical('0000:0000:0000:0000:0000:ffff:192.168.100.200') && isURL('https://example.com/"+
		strings.Repeat("a", 2048-20)+"')", "R", "", "")))
	if d := decide(s, pooledAuto()); !d.Skip {
		t.Errorf("decision = %s %q, want valid arguments at the bounds accepted", d.Reason, d.Message)
	}
}

// semver() and isSemver() parse every pre-release identifier into its own value: on an
// annotation of `0.0.0-a.a.a…` (131,000 identifiers, within the declared bounds) one call
// allocated ~23 MiB (issue #15, atk10 finding 1). A version longer than 1,024 characters is
// not parsed: isSemver() answers false, semver() fails naming the bound; a literal past it is
// refused when written.
func TestSemverParsesAreBounded(t *testing.T) {
	c := newCompiler(t)
	huge := "0.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 131_000), ".")
	for _, tc := range []struct{ expr, want string }{
		{"isSemver(vm.annotations['a'])", ""},
		{"isSemver(vm.annotations['a'], true)", ""},
		{"semver(vm.annotations['a']).major() == 1", "semver(): argument beyond the bound policies are evaluated with: 262005 characters, at most 1024"},
		{"semver(vm.annotations['a'], true).major() == 1", "semver(): argument beyond the bound policies are evaluated with: 262005 characters, at most 1024"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			s := setOf(t, c, newPolicy("p", skipRule("r", tc.expr, "R", "", "")))
			d := decide(s, withAnnotation(huge))
			if tc.want == "" {
				if d.Reason == evaluator.ReasonPolicyError || d.Skip {
					t.Errorf("decision = %s %q, want the rule false", d.Reason, d.Message)
				}
				return
			}
			if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, tc.want) {
				t.Errorf("decision = %s %q, want a policy error holding %q", d.Reason, d.Message, tc.want)
			}
		})
	}
	// At the bound a version still parses.
	atBound := "1.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 509), ".")
	one := decide(setOf(t, c, newPolicy("p", skipRule("r", "!isSemver(vm.annotations['a'])", "R", "", ""))), withAnnotation(atBound))
	if one.Reason == evaluator.ReasonPolicyError || one.Skip {
		t.Fatalf("decision = %s %q, want a valid version at the bound accepted", one.Reason, one.Message)
	}
	if errs := compileRule(c, "isSemver('"+atBound+"a')"); len(errs) != 0 {
		t.Errorf("a literal at the bound: %v, want it admitted", errs)
	}
	if errs := compileRule(c, "semver('"+atBound+"aa').major() == 1"); len(errs) == 0 {
		t.Error("a literal past the bound is admitted, want it refused when written (it fails whenever evaluated)")
	}
}
