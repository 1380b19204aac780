package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// maxMessageBytes keeps the Ready message below metav1.Condition's 32768-byte limit.
const maxMessageBytes = 32000

// outcome is what compiling one observed generation of a policy led to.
type outcome struct {
	// generation is the observed (current) generation.
	generation int64
	// errs are the current generation's compile errors; empty when it compiled.
	errs field.ErrorList
	// serving is the generation in force, 0 when none.
	serving int64
	// restoreErr says why the stored last good generation could not be served, if it was
	// needed and tried.
	restoreErr error
	// notPersisted is set when the serving spec is too large to be stored in
	// AnnotationLastGood, so it would not survive a restart while a later generation fails.
	notPersisted bool
	// warnings are what compiling the current generation found (evaluator.Policy.Warnings),
	// when it compiled.
	warnings []evaluator.Warning
}

// newStatus returns p's status for the outcome: observed and serving generation, the Ready
// condition, and, when the current generation compiled, the WithinCostLimits condition;
// other conditions are kept.
func newStatus(p *v1alpha1.ClusterIPAMPolicy, out outcome) v1alpha1.ClusterIPAMPolicyStatus {
	s := p.Status.DeepCopy()
	s.ObservedGeneration = out.generation
	s.ServingGeneration = out.serving
	meta.SetStatusCondition(&s.Conditions, readyCondition(out))
	if len(out.errs) == 0 {
		meta.SetStatusCondition(&s.Conditions, costCondition(out))
	}
	return *s
}

// costCondition is WithinCostLimits for a generation that compiled: False listing its cost
// warnings (the webhook returned the same when it was written), True without.
func costCondition(out outcome) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionWithinCostLimits, ObservedGeneration: out.generation,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonEstimatesWithinLimits,
		Message: fmt.Sprintf("Every expression of generation %d is estimated within the cost limits it runs under", out.generation)}
	if len(out.warnings) == 0 {
		return c
	}
	msgs := make([]string, len(out.warnings))
	for i, w := range out.warnings {
		msgs[i] = w.String()
	}
	c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonEstimateExceedsLimit
	c.Message = truncate(fmt.Sprintf("generation %d: %s", out.generation, strings.Join(msgs, "; ")), maxMessageBytes)
	return c
}

// readyCondition is Ready=True/Compiled when the observed generation compiled, else
// Ready=False/CompilationFailed listing every error with its field path and saying which
// generation, if any, serves instead.
func readyCondition(out outcome) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: out.generation}
	if len(out.errs) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonCompiled
		c.Message = fmt.Sprintf("Generation %d compiled and serves", out.generation)
		if out.notPersisted {
			c.Message += fmt.Sprintf("; its spec is too large to be kept in annotation %s, "+
				"so after a restart a later generation that does not compile leaves the policy unused", AnnotationLastGood)
		}
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonCompilationFailed
	c.Message = failureMessage(out)
	return c
}

// failureMessage lists the compile errors, then what serves instead.
func failureMessage(out outcome) string {
	var tail string
	switch {
	case out.serving != 0:
		tail = fmt.Sprintf("; generation %d keeps serving", out.serving)
	case out.restoreErr != nil:
		tail = fmt.Sprintf("; the last good generation cannot be restored (%v); the policy is not used until it compiles", out.restoreErr)
	default:
		tail = "; the policy is not used until it compiles"
	}
	msgs := make([]string, len(out.errs))
	for i, e := range out.errs {
		msgs[i] = describeError(e)
	}
	head := fmt.Sprintf("generation %d does not compile: %s", out.generation, strings.Join(msgs, "; "))
	return truncate(head, maxMessageBytes-len(tail)) + tail
}

// describeError renders one compile error on one line: its field path, then what is wrong.
// An invalid expression is not repeated (it can be 5 KiB long), and CEL's source snippets
// ("| expr", "| ^") are dropped: the path and the line:column locate the problem.
func describeError(e *field.Error) string {
	body := e.ErrorBody()
	if e.Type == field.ErrorTypeInvalid && e.Detail != "" {
		body = e.Detail
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "|") {
			lines = append(lines, strings.Replace(t, "ERROR: <input>:", "at ", 1))
		}
	}
	return e.Field + ": " + strings.Join(lines, ", ")
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	const mark = " …"
	if len(s) <= n {
		return s
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
