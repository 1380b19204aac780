package policytest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vmipam/vmipam/evaluator"
)

// diff lists the expectations d does not meet, in a fixed order.
func (e Expectation) diff(d evaluator.Decision) []string {
	var out []string
	check := func(field string, got, want any, given bool) {
		if given && got != want {
			out = append(out, fmt.Sprintf("%s: got %q, want %q", field, fmt.Sprint(got), fmt.Sprint(want)))
		}
	}
	check("allocation", d.Allocation, deref(e.Allocation), e.Allocation != nil)
	check("skip", d.Skip, deref(e.Skip), e.Skip != nil)
	check("reason", d.Reason, deref(e.Reason), e.Reason != nil)
	check("rule", d.Rule, deref(e.Rule), e.Rule != nil)
	check("policy", d.Policy, deref(e.Policy), e.Policy != nil)
	check("hotplug", d.Hotplug, deref(e.Hotplug), e.Hotplug != nil)
	if pe := e.Provenance; pe != nil {
		check("provenance.allocation", d.Provenance.Allocation, deref(pe.Allocation), pe.Allocation != nil)
		check("provenance.skip", d.Provenance.Skip, deref(pe.Skip), pe.Skip != nil)
		check("provenance.hotplug", d.Provenance.Hotplug, deref(pe.Hotplug), pe.Hotplug != nil)
	}
	if e.MessageContains != "" && !strings.Contains(d.Message, e.MessageContains) {
		out = append(out, fmt.Sprintf("message: got %q, want it to contain %q", d.Message, e.MessageContains))
	}
	return append(out, e.auditDiff(d.Trace.Audit)...)
}

func (e Expectation) auditDiff(records []evaluator.AuditRecord) []string {
	var out []string
	for _, policy := range slices.Sorted(maps.Keys(e.Audit)) {
		i := slices.IndexFunc(records, func(r evaluator.AuditRecord) bool { return r.Policy == policy })
		if i < 0 {
			out = append(out, fmt.Sprintf("audit[%s]: no record, want one", policy))
			continue
		}
		for _, line := range e.Audit[policy].diff(recordDecision(records[i])) {
			out = append(out, fmt.Sprintf("audit[%s].%s", policy, line))
		}
	}
	return out
}

// decision reads an audit record as the decision its policy would have made.
func recordDecision(r evaluator.AuditRecord) evaluator.Decision {
	if r.Error != "" {
		return evaluator.Decision{Allocation: evaluator.AllocationUnknown, Skip: true, Reason: evaluator.ReasonPolicyError,
			Message: r.Error, Policy: r.Policy}
	}
	return evaluator.Decision{Allocation: r.Allocation, Skip: r.Skip, Reason: r.Reason, Message: r.Message,
		Hotplug: r.Hotplug, Rule: r.Rule, Policy: r.Policy, Provenance: r.Provenance}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
