package evaluator

import (
	"math"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// ratchet decides which expressions of an update compile as stored (in the
// StoredExpressions environment, without the checks only new expressions get): those whose
// text at the same field path is unchanged from the stored object AND whose meaning is, that
// is every variable they read is defined as it was. An expression's text alone does not fix
// its meaning: `'%s'.format([variables.a])` is harmless while a is `[vm.name]` and formats
// megabytes once a is `vm.labels.map(k, vm.labels)`, and an update that changes only a must
// have the rule checked as new.
type ratchet struct {
	// stored indexes the stored object's expressions by field path (storedExpressions).
	stored map[string]string
	// varsChanged: the variables differ from the stored ones (a name, an expression, the
	// order); when they do not, text decides alone, and nothing is parsed twice.
	varsChanged bool
	// unchanged holds the variables defined as in the stored object: same name, expression
	// and index, reading only variables before it that are unchanged themselves.
	unchanged map[string]bool
	// index is each variable's index in the update (its first, when repeated).
	index map[string]int
	// parser parses an expression to find the variables it reads.
	parser *cel.Env
}

// newRatchet compares the update p with the stored object old (nil on create).
func newRatchet(envSet *environment.EnvSet, p, old *v1alpha1.ClusterIPAMPolicy) *ratchet {
	r := &ratchet{stored: storedExpressions(old)}
	if old == nil || sameVariables(old.Spec.Variables, p.Spec.Variables) {
		return r
	}
	r.varsChanged = true
	r.unchanged, r.index = map[string]bool{}, map[string]int{}
	r.parser, _ = envSet.Env(environment.StoredExpressions) // nil: nothing counts as stored
	oldIndex := map[string]int{}
	for i, v := range old.Spec.Variables {
		if _, seen := oldIndex[v.Name]; !seen {
			oldIndex[v.Name] = i
		}
	}
	for i, v := range p.Spec.Variables {
		if _, seen := r.index[v.Name]; seen {
			continue
		}
		r.index[v.Name] = i
		o, inOld := oldIndex[v.Name]
		r.unchanged[v.Name] = inOld && o == i && old.Spec.Variables[i].Expression == v.Expression &&
			r.readsUnchanged(v.Expression, i)
	}
	return r
}

// isStored reports whether the expression src at path, seeing the variables before index
// visible (allVariables: all of them), compiles as stored; never for a nil ratchet (Lint).
func (r *ratchet) isStored(path string, src string, visible int) bool {
	if r == nil {
		return false
	}
	old, ok := r.stored[path]
	if !ok || old != src {
		return false
	}
	return !r.varsChanged || r.readsUnchanged(src, visible)
}

// readsUnchanged: every variable src reads is unchanged and among the first visible; false
// when src does not parse or uses `variables` other than by name.
func (r *ratchet) readsUnchanged(src string, visible int) bool {
	if r.parser == nil {
		return false
	}
	parsed, iss := r.parser.Parse(src)
	if failed(iss) {
		return false
	}
	names, whole := variableReads(parsed.NativeRep().Expr())
	if whole {
		return false
	}
	for name := range names {
		if i, ok := r.index[name]; !ok || i >= visible || !r.unchanged[name] {
			return false
		}
	}
	return true
}

// variableReads are the names of the variables e reads (variables.<name>, has() of one);
// whole: e uses `variables` otherwise (as a value, variables.?<name>), reading any of them.
func variableReads(e ast.Expr) (names map[string]bool, whole bool) {
	names = map[string]bool{}
	operands := map[int64]bool{}
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "variables" {
				names[sel.FieldName()] = true
				operands[op.ID()] = true
			}
		case ast.IdentKind:
			if e.AsIdent() == "variables" && !operands[e.ID()] {
				whole = true
			}
		}
	}))
	return names, whole
}

// sameVariables: a and b declare the same variables, in the same order.
func sameVariables(a, b []v1alpha1.NamedExpression) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Expression != b[i].Expression {
			return false
		}
	}
	return true
}

// allVariables is the visible index of an expression outside spec.variables.
const allVariables = math.MaxInt

// storedExpressions indexes the expressions of the previously stored policy by field path.
func storedExpressions(old *v1alpha1.ClusterIPAMPolicy) map[string]string {
	out := map[string]string{}
	if old == nil {
		return out
	}
	spec := field.NewPath("spec")
	for i, v := range old.Spec.Variables {
		out[spec.Child("variables").Index(i).Child("expression").String()] = v.Expression
	}
	for i, m := range old.Spec.MatchConditions {
		out[spec.Child("matchConditions").Index(i).Child("expression").String()] = m.Expression
	}
	if old.Spec.Allocation != nil {
		out[spec.Child("allocation", "expression").String()] = old.Spec.Allocation.Expression
	}
	for i, r := range old.Spec.SkipRules {
		out[spec.Child("skipRules").Index(i).Child("expression").String()] = r.Expression
		out[spec.Child("skipRules").Index(i).Child("messageExpression").String()] = r.MessageExpression
		out[spec.Child("skipRules").Index(i).Child("message").String()] = r.Message
	}
	if old.Spec.Hotplug != nil {
		out[spec.Child("hotplug", "expression").String()] = old.Spec.Hotplug.Expression
	}
	return out
}
