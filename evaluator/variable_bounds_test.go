package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// The static estimate assumes a variable holds at most 1,024 entries or characters, each
// element at most 317 (a qualified name); a value beyond that fails closed with a PolicyError
// naming the variable, so that an estimate that passed holds at run time. Before, each of
// these evaluated (at a cost the estimate had not allowed for).
func TestVariablesBeyondTheEstimatedBoundFailClosed(t *testing.T) {
	c := newCompiler(t)
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"long": strings.Repeat("x", 2000), "mid": strings.Repeat("y", 400)}
	in.VM.Labels = map[string]string{strings.Repeat("k", 300): "v"}
	for _, tc := range []struct{ expr, want string }{
		{"lists.range(2000)", "2000 entries, at most 1024"},
		{"vm.annotations['long']", "2000 characters, at most 1024"},
		{"[vm.annotations['mid']]", "400 characters, at most 317"},
		{"{'a': [vm.annotations['mid']]}", "400 characters, at most 317"},
	} {
		set := setOf(t, c, newPolicy("p", variable("v", tc.expr), matchCondition("m", "size(variables.v) > 0")))
		d := decide(set, in)
		if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "policy p: spec.variables[0].expression: value of "+tc.want) {
			t.Errorf("%s: %s %q, want a PolicyError naming the variable and %q", tc.expr, d.Reason, d.Message, tc.want)
		}
	}
	for _, ok := range []string{"lists.range(1024)", "vm.labels", "vm.labels.map(k, k)", "[vm.annotations['mid'].substring(0, 317)]"} {
		set := setOf(t, c, newPolicy("p", variable("v", ok), matchCondition("m", "size(variables.v) > 0")))
		if d := decide(set, in); d.Reason == evaluator.ReasonPolicyError || d.Provenance.Allocation != "p" {
			t.Errorf("%s: %s %q, want the policy to match", ok, d.Reason, d.Message)
		}
	}
}
