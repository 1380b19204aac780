package evaluator

import (
	_ "embed"
	"fmt"

	"github.com/vmipam/vmipam/policies"
)

// SafetyPolicy is the name of the built-in safety policy (safety.yaml) in a Decision's
// provenance; its rules are named ReservedRulePrefix+"<check>".
const SafetyPolicy = "builtin:safety"

// safetyYAML is the one source of vmipam's safety rules.
//
//go:embed safety.yaml
var safetyYAML []byte

// compileSafety compiles safety.yaml. It fails only if the embedded file is broken, which the
// package's tests rule out.
func (c *Compiler) compileSafety() (*Policy, error) {
	docs, err := policies.Decode(safetyYAML)
	if err != nil || len(docs) != 1 {
		return nil, fmt.Errorf("evaluator/safety.yaml: want one ClusterIPAMPolicy: %v", err)
	}
	p, errs := c.compile(&docs[0], &docs[0], true)
	if len(errs) > 0 {
		return nil, fmt.Errorf("evaluator/safety.yaml: %w", errs.ToAggregate())
	}
	return p, nil
}
