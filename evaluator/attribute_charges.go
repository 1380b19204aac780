package evaluator

import (
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// Accesses that cel-go's interpreter charges more than its checker estimates them
// (interpreter/runtimecost.go against checker/cost.go). An index or a field select plans as a
// qualifier of an attribute (interpreter/planner.go planCallIndex, planSelect): on a
// variable or a chain of accesses the checker's one unit per access is the run time's; but
// on any other operand — a call's result, a list or map literal, a comprehension — the
// planner makes it the root of a new relative attribute, which the run time charges one unit
// (common.SelectAndIdentCost) on top of the access, and the checker does not. And a select on
// an operand typed dyn is estimated at nothing (costSelect adds its unit only for maps and
// structs) though the run time charges its qualifier. So `[x][0]` is charged 2 for an
// estimate of 1 and dyn(vm).name 2 for 0: holders.vms.map(x, [x][0]) was estimated at 6,157
// and charged 6,403. deepCharges adds attributeCharge to the estimate, times the iterations
// of the comprehensions around each access.

// attributeCharge is what the run time charges the access e (a select, an index, an optional
// select or index) beyond cel-go's estimate: a unit when its operand is the root of a
// relative attribute, a unit when it selects a field of a dyn value; 0 for anything else.
func attributeCharge(a *ast.AST, e ast.Expr) uint64 {
	operand, ok := accessOperand(e)
	if !ok {
		return 0
	}
	charge := uint64(0)
	if !isAttribute(operand) {
		charge++
	}
	if e.Kind() == ast.SelectKind && !e.AsSelect().IsTestOnly() {
		if t := a.GetType(operand.ID()); t != nil && unknownShape(t) {
			charge++
		}
	}
	return charge
}

// accessOperand is the operand e accesses when e is a select, an index or an optional select
// or index.
func accessOperand(e ast.Expr) (ast.Expr, bool) {
	switch e.Kind() {
	case ast.SelectKind:
		return e.AsSelect().Operand(), true
	case ast.CallKind:
		call := e.AsCall()
		if accessFunctions[call.FunctionName()] && !call.IsMemberFunction() && len(call.Args()) == 2 {
			return call.Args()[0], true
		}
	}
	return nil, false
}

// accessFunctions are the operators the planner makes qualifiers of an attribute.
var accessFunctions = map[string]bool{operators.Index: true, operators.OptIndex: true, operators.OptSelect: true}

// isAttribute: the planner plans e as an attribute that an access qualifies without a new
// root: a variable, an access, or a conditional (whose branches are attributes or relative
// roots the conditional itself charges nothing for).
func isAttribute(e ast.Expr) bool {
	switch e.Kind() {
	case ast.IdentKind, ast.SelectKind:
		return true
	case ast.CallKind:
		fn := e.AsCall().FunctionName()
		return (accessFunctions[fn] && !e.AsCall().IsMemberFunction()) || fn == operators.Conditional
	}
	return false
}
