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
		{"cidr('::/0').containsIP(vm.annotations['a'])", "containsIP(): 261000 characters, at most 45"},
		{"cidr('::/0').containsCIDR(vm.annotations['a'])", "containsCIDR(): 261000 characters, at most 49"},
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
