package evaluator

import (
	"fmt"
	"strings"

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

// byteLen is the length of a string or bytes value, or of one behind optionals (which
// compare what they hold); false for other values.
func byteLen(v ref.Val) (uint64, bool) {
	v, _ = unwrapped(v)
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
	if len(args) != 2 {
		return linearCharge(args, limit)
	}
	if _, ok := args[1].(traits.Lister); ok {
		if cost := searchCharge([]ref.Val{args[1], args[0]}, limit); cost != nil {
			return cost
		}
	} else if cost := linearCharge(args, limit); cost != nil {
		return cost
	}
	if _, ok := args[1].(traits.Lister); !ok {
		return nil
	}
	cost := flatInListCharge(args[0], args[1])
	return &cost
}

// flatEqualCharge is the run-time charge of `a == b` or `a != b` on flat lists or maps:
// cel-go's (a tenth of the smaller size, rounded up: interpreter/runtimecost.go, which its
// checker estimates alike) plus compareCost of what equality may compare —
// for lists Σ min(len(a[i]), len(b[i])) over their common indexes, for maps the smaller of
// Σ len(key) + len(value) over either (each key of one is hashed into the other and its
// values compared, until one differs). Optionals are seen through: optional.of(a) ==
// optional.of(b) compares a and b (before, it was charged 1 whatever they held; issue #15).
// nil for other operands (cel-go's charge stands).
func flatEqualCharge(args []ref.Val) *uint64 {
	if len(args) != 2 {
		return nil
	}
	a, _ := unwrapped(args[0])
	b, _ := unwrapped(args[1])
	la, okA := a.(traits.Lister)
	lb, okB := b.(traits.Lister)
	var chars uint64
	switch {
	case okA && okB:
		n := min(listSize(a), listSize(b))
		for i := types.Int(0); i < types.Int(n); i++ {
			ea, _ := byteLen(la.Get(i))
			eb, _ := byteLen(lb.Get(i))
			chars = addSaturating(chars, min(ea, eb))
		}
	default:
		ma, okA := a.(traits.Mapper)
		mb, okB := b.(traits.Mapper)
		if !okA || !okB {
			return nil
		}
		chars = min(mapChars(ma), mapChars(mb))
	}
	// No unit on top of cel-go's tenth: the estimate has none, and `holders.vms ==
	// holders.vms` was charged 95 against an estimate of 94. One unit an element compared,
	// as `in` a list is charged (flatInListCharge): comparing two lists of 960 ints and the
	// deep-size check before it took ~0.6 µs an element, charged a tenth of a unit (issue #15).
	n := min(listSize(a), listSize(b))
	cost := addSaturating(addSaturating((n+9)/10, n), compareCost(chars))
	return &cost
}

// mapChars is Σ len(key) + len(value) over the string and bytes keys and values of m.
func mapChars(m traits.Mapper) uint64 {
	chars := uint64(0)
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		nk, _ := byteLen(k)
		nv, _ := byteLen(m.Get(k))
		chars = addSaturating(chars, addSaturating(nk, nv))
	}
	return chars
}

// flatCompareError is why `l in r`, `l == r` or `l != r` (function) must not run: its
// charge on flat operands exceeds the per-call limit; nil otherwise.
func flatCompareError(function string, l, r ref.Val, limit uint64) ref.Val {
	if (function != operators.In && nested(l)) || nested(r) {
		return nil // deepArgsError's
	}
	var cost uint64
	switch function {
	case operators.In:
		if _, ok := r.(traits.Lister); !ok {
			return nil
		}
		cost = flatInListCharge(l, r)
	default:
		c := flatEqualCharge([]ref.Val{l, r})
		if c == nil {
			return nil
		}
		cost = *c
	}
	if cost > limit {
		return types.WrapErr(fmt.Errorf("%s: comparing the strings of its operands would cost %d, beyond the "+
			"per-call cost limit %d", strings.Trim(function, "_@"), cost, limit))
	}
	return nil
}

// flatCompare adds the static charge of `x in l` (flatInCompare) or of `a == b`, `a != b`
// (flatEqualCompare).
func (w *deepWalk) flatCompare(env boundEnv, e ast.Expr, call ast.CallExpr, iterations uint64, known bool) {
	switch call.FunctionName() {
	case operators.In:
		w.flatInCompare(env, e, call, iterations, known)
	case operators.Equals, operators.NotEquals:
		w.flatEqualCompare(env, e, call, iterations, known)
	}
}

// flatEqualCompare adds the static charge of `a == b` or `a != b` on lists or maps (or dyn):
// compareCost of min(|a|, |b|) × min(bound of an element of a, of b) for lists,
// min(|a| × 2 × bound of a, |b| × 2 × bound of b) for maps (a key and a value an entry),
// times iterations (flatEqualCharge); an operand typed list or map without derived bounds
// is recorded, a dyn one is deepOperands' to refuse.
func (w *deepWalk) flatEqualCompare(env boundEnv, e ast.Expr, call ast.CallExpr, iterations uint64, known bool) {
	if len(call.Args()) != 2 {
		return
	}
	a, b := call.Args()[0], call.Args()[1]
	ta, tb := withoutOptionals(w.a.GetType(a.ID())), withoutOptionals(w.a.GetType(b.ID())) // compared as what they wrap
	if ta == nil || tb == nil || !collectionOrDyn(ta) || !collectionOrDyn(tb) ||
		(ta.Kind() == types.DynKind && tb.Kind() == types.DynKind) {
		return
	}
	ab, okA := deriveBound(env, a)
	bb, okB := deriveBound(env, b)
	loc := w.a.SourceInfo().GetStartLocation(e.ID())
	what := fmt.Sprintf("%s at %d:%d", strings.Trim(call.FunctionName(), "_"), loc.Line(), loc.Column()+1)
	if !okA || !okB || !known {
		w.unbounded = append(w.unbounded, fmt.Sprintf("%s: the strings of %s and %s have no bound the estimate "+
			"can derive, and %s compares them", what, operandName(w.a, a), operandName(w.a, b), what))
		return
	}
	chars := saturatingMul(min(ab.size, bb.size), min(ab.elem, bb.elem))
	if ta.Kind() == types.MapKind || tb.Kind() == types.MapKind {
		chars = saturatingMul(2, min(saturatingMul(ab.size, ab.elem), saturatingMul(bb.size, bb.elem)))
	}
	w.add(what, addSaturating(compareCost(chars), min(ab.size, bb.size)), iterations) // and an element a unit (flatEqualCharge)
}

// collectionOrDyn: a value of type t may be a list or a map.
func collectionOrDyn(t *types.Type) bool {
	switch t.Kind() {
	case types.ListKind, types.MapKind, types.DynKind, types.AnyKind:
		return true
	}
	return false
}

// add records the comparison of flat values what, charged charge on each of iterations.
func (w *deepWalk) add(what string, charge, iterations uint64) {
	if charge == 0 {
		return
	}
	w.ops = append(w.ops, deepOperation{what: what, charge: charge, iterations: iterations, flat: true})
	w.total = addSaturating(w.total, saturatingMul(charge, iterations))
}

// flatInCompare adds the static charge of `x in l` on a flat list of strings or bytes (or
// dyn): l's entries times compareCost of min(bound of x, bound of an element), times
// iterations; or records why it cannot be bounded. Other calls are left alone.
func (w *deepWalk) flatInCompare(env boundEnv, e ast.Expr, call ast.CallExpr, iterations uint64, known bool) {
	if len(call.Args()) != 2 {
		return
	}
	x, l := call.Args()[0], call.Args()[1]
	lt, xt := w.a.GetType(l.ID()), withoutOptionals(w.a.GetType(x.ID())) // optionals compare what they hold
	if lt == nil || xt == nil || lt.Kind() == types.MapKind || !mayBeString(xt) {
		return
	}
	if lt.Kind() == types.ListKind && len(lt.Parameters()) == 1 && !mayBeString(withoutOptionals(lt.Parameters()[0])) {
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
	w.add(what, compareCost(saturatingMul(lb.size, min(xb.size, elem))), iterations)
}

// mayBeString: a value of type t may be a string or bytes.
func mayBeString(t *types.Type) bool {
	switch t.Kind() {
	case types.StringKind, types.BytesKind, types.DynKind, types.AnyKind:
		return true
	}
	return false
}
