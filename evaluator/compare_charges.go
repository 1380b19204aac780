package evaluator

import (
	"fmt"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// `x in list` compares x with each element of the list, and comparing two strings (or bytes)
// of equal length walks them: cel-go charges the call one unit per element whatever their
// length (runtimecost.go: "all list containment checks are O(n)"), so on a list of 300
// copies of a 262,000-character annotation one rule spent 611 ms for 146,833 units (4.2 µs a
// unit), and one call on a 96,000-element list built by `+` ran ~0.6 s, uninterruptible. On
// a flat list it is therefore charged, statically (deepWalk.flatCompare) and at run time
// (inListCharge) with one formula, the list's length plus compareCost of the characters it
// may compare: Σ over its string elements of min(len(x), len(element)) — at most
// n × min(bound of x, bound of an element), which the estimate charges. A call whose charge
// exceeds the per-call limit does not run (checkedOperator), as deep.go's calls.

// compareCharsPerUnit is how many characters of two equal-length strings one unit pays for
// when they are compared: memequal runs at tens of GB/s, like hashing a map key
// (keyCharsPerUnit; BenchmarkCostCalibration "in-list-compare").
const compareCharsPerUnit = keyCharsPerUnit

// compareCost is the charge of comparing n characters of strings or bytes.
func compareCost(n uint64) uint64 { return (n + compareCharsPerUnit - 1) / compareCharsPerUnit }

// byteLen is the length of a string or bytes value, false for other values.
func byteLen(v ref.Val) (uint64, bool) {
	switch s := v.(type) {
	case types.String:
		return uint64(len(s)), true
	case types.Bytes:
		return uint64(len(s)), true
	}
	return 0, false
}

// flatInListCharge is the run-time charge of `x in l` on a flat list l: cel-go's one unit
// per element plus compareCost of Σ min(len(x), len(e)) over its string and bytes elements.
func flatInListCharge(x, l ref.Val) uint64 {
	n := listSize(l)
	lister, ok := l.(traits.Lister)
	nx, isString := byteLen(x)
	if !ok || !isString {
		return n
	}
	chars := uint64(0)
	for i := types.Int(0); i < types.Int(n); i++ {
		if ne, ok := byteLen(lister.Get(i)); ok {
			chars = addSaturating(chars, min(nx, ne))
		}
	}
	return addSaturating(n, compareCost(chars))
}

// inListCharge is the run-time charge of `x in l`: linearCharge when an operand nests,
// flatInListCharge otherwise (a map's `in` is linearCost's).
func inListCharge(args []ref.Val, limit uint64) *uint64 {
	if cost := linearCharge(args, limit); cost != nil || len(args) != 2 {
		return cost
	}
	if _, ok := args[1].(traits.Lister); !ok {
		return nil
	}
	cost := flatInListCharge(args[0], args[1])
	return &cost
}

// inListError is why `x in l` must not run: its charge exceeds the per-call limit; nil
// otherwise.
func inListError(x, l ref.Val, limit uint64) ref.Val {
	if _, ok := l.(traits.Lister); !ok || nested(l) {
		return nil
	}
	if cost := flatInListCharge(x, l); cost > limit {
		return types.WrapErr(fmt.Errorf("in: comparing %d characters of its operands would cost %d, beyond the "+
			"per-call cost limit %d", mustByteLen(x), cost, limit))
	}
	return nil
}

// mustByteLen is byteLen without the flag.
func mustByteLen(v ref.Val) uint64 {
	n, _ := byteLen(v)
	return n
}

// flatCompare adds the static charge of `x in l` on a flat list of strings or bytes (or
// dyn): l's entries times compareCost of min(bound of x, bound of an element), times
// iterations; or records why it cannot be bounded. Other calls are left alone.
func (w *deepWalk) flatCompare(env boundEnv, e ast.Expr, call ast.CallExpr, iterations uint64, known bool) {
	if call.FunctionName() != operators.In || len(call.Args()) != 2 {
		return
	}
	x, l := call.Args()[0], call.Args()[1]
	lt, xt := w.a.GetType(l.ID()), w.a.GetType(x.ID())
	if lt == nil || xt == nil || lt.Kind() == types.MapKind || !mayBeString(xt) {
		return
	}
	if lt.Kind() == types.ListKind && len(lt.Parameters()) == 1 && !mayBeString(lt.Parameters()[0]) {
		return
	}
	xb, okX := deriveBound(env, x)
	lb, okL := deriveBound(env, l)
	loc := w.a.SourceInfo().GetStartLocation(e.ID())
	what := fmt.Sprintf("in at %d:%d", loc.Line(), loc.Column()+1)
	if !okX || !okL || !known {
		w.unbounded = append(w.unbounded, fmt.Sprintf("%s: the lengths of %s and the strings of %s have no bound "+
			"the estimate can derive, and in compares them", what, operandName(w.a, x), operandName(w.a, l)))
		return
	}
	elem := lb.elem
	if elem == 0 {
		elem = xb.size // no element bound: as if each were as long as x
	}
	charge := compareCost(saturatingMul(lb.size, min(xb.size, elem)))
	if charge == 0 {
		return
	}
	w.ops = append(w.ops, deepOperation{what: what, charge: charge, iterations: iterations})
	w.total = addSaturating(w.total, saturatingMul(charge, iterations))
}

// mayBeString: a value of type t may be a string or bytes.
func mayBeString(t *types.Type) bool {
	switch t.Kind() {
	case types.StringKind, types.BytesKind, types.DynKind, types.AnyKind:
		return true
	}
	return false
}
