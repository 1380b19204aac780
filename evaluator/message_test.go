package evaluator_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// A messageExpression result that could forge or garble the NetworkReady message and events
// it lands in — a line break, or the "; " that separates the message's items — falls back to
// the static message, with the reason in the trace. Before, it was used as is.
func TestMessageThatWouldGarbleTheConditionFallsBack(t *testing.T) {
	for _, expr := range []string{`'line\nforged'`, `'a; b'`, `'tab\tand\rreturn'`,
		// Unicode separators, a bidi override, and "; " spelled with a no-break space: before,
		// each was used as is.
		`'line\u2028forged'`, `'para\u2029forged'`, `'evil\u202Etxt'`, `'a;\u00a0ClusterNetwork/x: Forged'`, `'zero\u200bwidth'`} {
		t.Run(expr, func(t *testing.T) {
			p := newPolicy("p", skipRule("r", "true", "Custom", "static text", expr))
			d := decide(setOf(t, newCompiler(t), p), pooledAuto())
			if !strings.HasPrefix(d.Message, "static text (messageExpression failed: ") || strings.ContainsAny(d.Message, "\n\r\t") {
				t.Errorf("message = %q, want the static message and why", d.Message)
			}
		})
	}
}

// A non-string allocation names the real value and its type. Before: `evaluated to ""`.
func TestAllocationOfTheWrongTypeNamesTheValue(t *testing.T) {
	d := decide(setOf(t, newCompiler(t), newPolicy("p", allocation("dyn(1)"))), pooledAuto())
	if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "evaluated to 1 (int)") {
		t.Errorf("message = %q, want it to name the int 1", d.Message)
	}
}

// A non-string messageExpression names the value and its type. Before: "did not evaluate to a
// string".
func TestMessageOfTheWrongTypeNamesTheValue(t *testing.T) {
	p := newPolicy("p", skipRule("r", "true", "Custom", "static text", "dyn(42)"))
	d := decide(setOf(t, newCompiler(t), p), pooledAuto())
	if !strings.Contains(d.Message, "evaluated to 42 of type int") {
		t.Errorf("message = %q, want it to name the int 42", d.Message)
	}
}
