package evaluator

import (
	"fmt"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// orderedKinds are the kinds cel-go's lists extension can order (ext/lists.go: sort(),
// sortBy() and their keys require traits.Comparer values of one type): every other value —
// an IP, a CIDR, a Semver, a Quantity, a URL, a list, a map, an optional, null — fails with
// "list elements must be comparable" when its list is sorted.
var orderedKinds = map[types.Kind]bool{
	types.IntKind: true, types.UintKind: true, types.DoubleKind: true, types.StringKind: true,
	types.BytesKind: true, types.BoolKind: true, types.DurationKind: true, types.TimestampKind: true,
}

// unorderedSortErrors names each sort() or sortBy() in the checked expression e whose list
// (or sortBy's keys) the checker knows only as dyn: cel-go's checker accepts it for any
// element type and the call fails at run time on the values above (`dyn([ip(…)]).sort()`
// would fail on every VM with a PolicyError). A list whose element type the checker knows
// is refused by the checker itself when the type is not ordered. Checked for new expressions only.
func unorderedSortErrors(a *ast.AST) []string {
	var errs []string
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(n ast.Expr) {
		if n.Kind() != ast.CallKind || !n.AsCall().IsMemberFunction() {
			return
		}
		call := n.AsCall()
		var sorted ast.Expr
		switch {
		case call.FunctionName() == "sort" && len(call.Args()) == 0:
			sorted = call.Target()
		case call.FunctionName() == "@sortByAssociatedKeys" && len(call.Args()) == 1:
			sorted = call.Args()[0] // the keys sortBy computed
		default:
			return
		}
		t := a.GetType(sorted.ID())
		if !dynOrdered(t) {
			return
		}
		loc := a.SourceInfo().GetStartLocation(n.ID())
		errs = append(errs, fmt.Sprintf("sort() or sortBy() at %d:%d orders a list whose elements are of type %s, which may "+
			"hold values it cannot order (an IP, a Semver, a Quantity, a list…) and then fails on every evaluation: "+
			"sort a list of ints, uints, doubles, strings, bytes, bools, durations or timestamps (convert with int(), "+
			"string() …)", loc.Line(), loc.Column()+1, t))
	}))
	return errs
}

// dynOrdered: a list of type t is sorted whose values the checker knows only as dyn (t is
// dyn, or a list of dyn): nothing ensures they are of an ordered kind.
func dynOrdered(t *types.Type) bool {
	switch {
	case t == nil:
		return false
	case t.Kind() == types.DynKind || t.Kind() == types.AnyKind:
		return true
	case t.Kind() == types.ListKind && len(t.Parameters()) == 1:
		e := t.Parameters()[0].Kind()
		return !orderedKinds[e] && (e == types.DynKind || e == types.AnyKind)
	}
	return false
}
