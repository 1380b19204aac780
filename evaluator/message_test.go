package evaluator_test

import (
	"fmt"
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

// An input field read only by a messageExpression, when beyond its bounds, makes that message
// fall back to the static one; the decision, which never reads it, stands. Before, the bound
// of every field any expression read was enforced on the whole policy, and 300 labels read by
// a message failed a Fail policy that matched no rule (/tmp/a15w msgx.yaml, vm300.yaml).
// Class: a bound enforced for an expression whose failure the policy tolerates.
func TestAFieldBeyondItsBoundsReadOnlyByAMessageFallsBack(t *testing.T) {
	c := newCompiler(t)
	s := setOf(t, c, newPolicy("p",
		skipRule("labels", "interface.name == 'corp'", "Labelled", "static message", "'labels: ' + string(size(vm.labels))"),
		skipRule("never", "interface.name == 'nope'", "Never", "never", "'labels: ' + string(size(vm.labels))")))
	in := pooledAuto()
	in.VM.Labels = map[string]string{}
	for i := range 300 {
		in.VM.Labels[fmt.Sprintf("l%d", i)] = "v"
	}
	d := decide(s, in)
	if d.Reason != "Labelled" || !strings.HasPrefix(d.Message, "static message") {
		t.Errorf("decision = %s %q, want Labelled with the static message (the message's read beyond bounds falls back)", d.Reason, d.Message)
	}
	// A field a decision reads stays enforced.
	s = setOf(t, c, newPolicy("p",
		skipRule("labels", "size(vm.labels) > 0", "Labelled", "static message", "")))
	if d := decide(s, in); d.Reason != evaluator.ReasonPolicyError {
		t.Errorf("decision = %s %q, want a PolicyError: the rule reads labels beyond their bounds", d.Reason, d.Message)
	}
}

// A skip rule's static message is held to what a messageExpression's result is: it was not,
// and "forged; ClusterNetwork/storage: IPAddressPending: fake" wrote an item for an
// interface the VM does not have. Refused when new; a stored one keeps compiling, and
// SafeMessage defuses it where the NetworkReady message is assembled.
func TestStaticMessagesCannotForgeItems(t *testing.T) {
	c := newCompiler(t)
	for _, msg := range []string{"forged; ClusterNetwork/storage: IPAddressPending: fake", "two\nlines", "bidi \u202e"} {
		p := newPolicy("p", skipRule("r", "true", "Never", msg, ""))
		if _, errs := c.Compile(p, nil); !strings.Contains(errs.ToAggregate().Error(), "spec.skipRules[0].message") {
			t.Errorf("%q: errors %v, want the message refused at its path", msg, errs)
		}
		if _, errs := c.Compile(p, p); len(errs) > 0 {
			t.Errorf("%q stored: %v, want it to keep compiling", msg, errs)
		}
		if safe := evaluator.SafeMessage(msg); strings.Contains(safe, "; ") || strings.ContainsAny(safe, "\n\u202e") {
			t.Errorf("SafeMessage(%q) = %q, still forges", msg, safe)
		}
	}
	if s := "plain: message, nothing to defuse"; evaluator.SafeMessage(s) != s {
		t.Errorf("SafeMessage changed a plain message")
	}
}
