package evaluator

import (
	"regexp"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// The names and enumerations a policy declares, checked as the CRD checks them (ipamctl
// compiles files the API server never saw), and the shapes of expressions the semantics
// refuse.

// uniqueSkipRuleName reports a skip rule named like an earlier one (seen holds the names so
// far): a decision names the rule that fired, which must tell which one it was. A name the
// stored version of the policy already repeats is tolerated (ratcheting), so that a policy
// stored before this check keeps compiling, in the controller and on updates.
func (cc *compilation) uniqueSkipRuleName(path *field.Path, name string, seen map[string]bool) {
	if seen[name] && !cc.storedDuplicateSkipRules[name] {
		cc.errs = append(cc.errs, field.Duplicate(path, name))
	}
	seen[name] = true
}

// conditionName checks a matchCondition's name: a qualified name, as ValidatingAdmissionPolicy
// accepts (`my-check`, `example.com/my-check`), or a CEL identifier (which earlier versions
// required, and `_check` is no qualified name). ipamctl compiles files the API server never
// saw, and must not accept what it would refuse.
func (cc *compilation) conditionName(path *field.Path, name string) {
	if identifierPattern.MatchString(name) && len(name) <= 63 {
		return
	}
	if msgs := content.IsLabelKey(name); len(msgs) > 0 {
		cc.errs = append(cc.errs, field.Invalid(path, name, "must be a qualified name (as in ValidatingAdmissionPolicy: "+
			"an optional DNS subdomain prefix and '/', then at most 63 alphanumeric characters, '-', '_' or '.', "+
			"starting and ending with an alphanumeric) or a CEL identifier: "+strings.Join(msgs, "; ")))
	}
}

// ReservedRulePrefix starts the names of the built-in safety policy's rules
// ("vmipam:static-missing", …). A policy's skip rule may not use it: the safety rules can be
// neither replaced nor disabled.
const ReservedRulePrefix = "vmipam:"

// unreservedSkipRuleName reports a skip rule name with ReservedRulePrefix, unless the stored
// version of the policy already has it (ratcheting; such a rule replaces nothing).
func (cc *compilation) unreservedSkipRuleName(path *field.Path, name string) {
	if !cc.builtin && strings.HasPrefix(name, ReservedRulePrefix) && !cc.storedRuleNames[name] {
		cc.errs = append(cc.errs, field.Invalid(path, name,
			"names starting with "+ReservedRulePrefix+" are reserved for vmipam's safety rules, which cannot be replaced"))
	}
}

// skipRuleNames are the skip rule names of old.
func skipRuleNames(old *v1alpha1.ClusterIPAMPolicy) map[string]bool {
	out := map[string]bool{}
	if old != nil {
		for _, r := range old.Spec.SkipRules {
			out[r.Name] = true
		}
	}
	return out
}

// duplicateSkipRuleNames are the skip rule names old repeats.
func duplicateSkipRuleNames(old *v1alpha1.ClusterIPAMPolicy) map[string]bool {
	out := map[string]bool{}
	if old == nil {
		return out
	}
	seen := map[string]bool{}
	for _, r := range old.Spec.SkipRules {
		out[r.Name] = seen[r.Name]
		seen[r.Name] = true
	}
	return out
}

// reasonPattern is the CRD's pattern for skipRules[].reason, checked here too because
// ipamctl compiles files that never went through the API server.
var reasonPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// enums checks the enumerated fields the CRD also validates, for the same reason.
func (cc *compilation) enums(spec *field.Path, out *Policy) {
	if out.FailurePolicy != v1alpha1.FailurePolicyFail && out.FailurePolicy != v1alpha1.FailurePolicyIgnore {
		cc.errs = append(cc.errs, field.NotSupported(spec.Child("failurePolicy"), out.FailurePolicy,
			[]v1alpha1.FailurePolicy{v1alpha1.FailurePolicyFail, v1alpha1.FailurePolicyIgnore}))
	}
	if out.Mode != v1alpha1.PolicyModeEnforce && out.Mode != v1alpha1.PolicyModeAudit {
		cc.errs = append(cc.errs, field.NotSupported(spec.Child("mode"), out.Mode,
			[]v1alpha1.PolicyMode{v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit}))
	}
	for i, n := range out.networks {
		if n.Type != "Network" && n.Type != "ClusterNetwork" {
			cc.errs = append(cc.errs, field.NotSupported(spec.Child("match", "networks").Index(i).Child("type"),
				n.Type, []string{"Network", "ClusterNetwork"}))
		}
	}
}

var identifierPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// celReserved are the words CEL does not accept as identifiers (as in Kubernetes'
// validation of ValidatingAdmissionPolicy variable names).
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true,
	"const": true, "continue": true, "else": true, "for": true, "function": true, "if": true,
	"import": true, "let": true, "loop": true, "package": true, "namespace": true,
	"return": true, "var": true, "void": true, "while": true,
}

// variableNameError says why name cannot be a variable's name, or returns "".
func variableNameError(name string) string {
	switch {
	case name == "":
		return "a name is required"
	case !identifierPattern.MatchString(name) || len(name) > 63:
		return "must be a CEL identifier of at most 63 characters: a letter or _, then letters, digits or _"
	case celReserved[name]:
		return "is a reserved word in CEL"
	}
	return ""
}

// wholeVariables reports whether e uses `variables` other than as the operand of a field
// selection (variables.x, has(variables.x)). Used whole — made a variable's value, put in a
// list, passed to dyn() and iterated — it let a variable reach itself (a stack overflow that
// killed the process) and made the bounds check of every variable holding it walk all the
// earlier ones again, exponentially in their number, uncharged. Its type (an object of the
// variables declared before) offers nothing that reading by name does not.
func wholeVariables(e ast.Expr) bool {
	operands := map[int64]bool{}
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			operands[e.AsSelect().Operand().ID()] = true
		case ast.IdentKind:
			if e.AsIdent() == "variables" && !operands[e.ID()] {
				found = true
			}
		}
	}))
	return found
}

// iteratesAsVariables reports whether a comprehension of e names an iteration variable
// `variables`. CEL accepts it, and inside it `variables.v` is a field of the element, while
// every analysis of the policy (names, the estimate, the ratchet) and every reader takes it
// for the policy variable v. The name only shadows, so it is refused rather than scoped.
func iteratesAsVariables(e ast.Expr) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.ComprehensionKind {
			c := e.AsComprehension()
			found = found || c.IterVar() == "variables" || (c.HasIterVar2() && c.IterVar2() == "variables")
		}
	}))
	return found
}

// allocationValues are what an allocation expression may return.
var allocationValues = []string{string(AllocationAuto), string(AllocationStatic), string(AllocationNone), AllocationPass}

// checkAllocationLiteral returns the offending value when the allocation expression is a
// string literal outside the enum (or a conditional whose branches are such literals).
func checkAllocationLiteral(e ast.Expr) string {
	switch e.Kind() {
	case ast.LiteralKind:
		if s, ok := e.AsLiteral().(types.String); ok && !validAllocation(string(s)) {
			return string(s)
		}
	case ast.CallKind:
		if c := e.AsCall(); c.FunctionName() == "_?_:_" && len(c.Args()) == 3 {
			if bad := checkAllocationLiteral(c.Args()[1]); bad != "" {
				return bad
			}
			return checkAllocationLiteral(c.Args()[2])
		}
	}
	return ""
}

func validAllocation(s string) bool {
	for _, v := range allocationValues {
		if s == v {
			return true
		}
	}
	return false
}
