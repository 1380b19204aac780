package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// Quantity operations rescale decimals of up to ~130 digits but were charged 1 each: one
// policy of add/sub/isInteger loops ran ~1.2 µs a unit (issue #15, atk15b finding 8). Each
// is charged quantityOpCost, statically and at run time. Class: a library call charged a
// constant below its measured work.
func TestQuantityArithmeticIsCharged(t *testing.T) {
	c := newCompiler(t)
	cost := func(body string) int64 {
		s := setOf(t, c, newPolicy("p", skipRule("r",
			"[quantity('1e64').add(quantity('1e-64'))].exists(q, lists.range(100).exists(i, "+body+"))", "R", "", "")))
		d := decide(s, pooledAuto())
		if d.Reason == evaluator.ReasonPolicyError || d.Skip {
			t.Fatalf("decision = %s %q, want the rule evaluated to false", d.Reason, d.Message)
		}
		return d.Cost
	}
	ops, none := cost("q.add(q).sub(q).isInteger() && i < 0"), cost("i < 0")
	if want := int64(100 * 3 * 4); ops-none < want {
		t.Errorf("cost with three quantity operations an iteration = %d, without = %d: want at least %d more", ops, none, want)
	}
	_, errs := c.Compile(newPolicy("p", variable("q", "quantity('1e64').add(quantity('1e-64'))"),
		skipRule("r", "lists.range(5000).exists(i, variables.q.add(variables.q).sub(variables.q).isInteger() && i < 0)", "R", "", "")), nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "estimated worst-case cost") {
		t.Errorf("Compile errors = %v, want the rule's estimate to refuse 15,000 quantity operations (estimated 80,000 before)", errs)
	}
}
