package evaluator

import (
	"context"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// The guarded parses are estimated, and charged at run time, on at most the characters their
// guard admits (guardedLengths): estimated by the argument's bound (a 256 KiB annotation is
// 26,214 units), a validate-then-use rule and four isIP() calls on annotations were refused
// at ~104,870 though past the bound each call answers false, or fails, after a length check
// (vmipam#15). Class: an estimate that ignores a bound the run time enforces. Each rule
// compiles, and on an input whose every annotation is 256 KiB its run-time cost stays within
// its estimate without failing a cost limit.
func TestGuardedParsesEstimatedWithinTheirBound(t *testing.T) {
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ip, cidr := "vm.annotations[?'ipam.example.com/ip'].orValue('')", "vm.annotations[?'ipam.example.com/cidr'].orValue('')"
	four := func(call string) string {
		return strings.Join([]string{call, call, call, call}, " || ")
	}
	for _, tc := range []struct {
		name, expr string
		vars       []v1alpha1.NamedExpression
	}{
		{"validate-then-use", "variables.wantIP != '' && isIP(variables.wantIP) && variables.wantCIDR != '' && " +
			"isCIDR(variables.wantCIDR) && !cidr(variables.wantCIDR).containsIP(ip(variables.wantIP))",
			[]v1alpha1.NamedExpression{{Name: "wantIP", Expression: ip}, {Name: "wantCIDR", Expression: cidr}}},
		{"four isIP", four("isIP(" + ip + ")"), nil},
		{"four isCIDR", four("isCIDR(" + cidr + ")"), nil},
		{"four isURL", four("isURL(" + ip + ")"), nil},
		{"four isQuantity", four("isQuantity(" + ip + ")"), nil},
		{"four ip()", four("ip(" + ip + ").family() == 4"), nil},
		{"four url()", four("url(" + ip + ").getHost() == ''"), nil},
		{"four quantity()", four("quantity(" + ip + ").isInteger()"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			compile := func(name, expr string) *Policy {
				p := &v1alpha1.ClusterIPAMPolicy{Spec: v1alpha1.ClusterIPAMPolicySpec{Variables: tc.vars,
					SkipRules:  []v1alpha1.SkipRule{{Name: "r", Reason: "R", Message: "m", Expression: expr}},
					Allocation: &v1alpha1.Expression{Expression: "'Auto'"}}}
				p.Name = name
				compiled, errs := c.Compile(p, nil)
				if len(errs) > 0 {
					t.Fatalf("%s refused: %v", expr, errs)
				}
				return compiled
			}
			compiled, control, builtin := compile("p", tc.expr), compile("p", "false"), compile("b", "false")
			annotations := map[string]string{}
			for _, k := range []string{"ipam.example.com/ip", "ipam.example.com/cidr", "a"} {
				annotations[k] = strings.Repeat("1", 256<<10)
			}
			in := Input{VM: VM{Name: "vm", Annotations: annotations}}
			d := NewSet([]*Policy{compiled}, builtin).Decide(context.Background(), in, Options{})
			if strings.Contains(d.Message, "cost") {
				t.Errorf("decision = %s %q, want no cost limit failed", d.Reason, d.Message)
			}
			// What the rule (and the variables it reads) spent: the decision's cost less that of
			// the same set with the rule `false` (the safety and built-in policies').
			base := NewSet([]*Policy{control}, builtin).Decide(context.Background(), in, Options{})
			if spent := d.Cost - base.Cost; spent <= 0 || uint64(spent) > compiled.estimated-control.estimated {
				t.Errorf("rule spent %d at run time, estimated %d: want within it", spent, compiled.estimated-control.estimated)
			}
			t.Logf("estimated %d, decision %s", compiled.estimated, d.Reason)
		})
	}
}
