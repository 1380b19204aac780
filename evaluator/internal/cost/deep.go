package cost

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Comparing operations — equality, `in`, distinct(), flatten(), includes(), indexOf(),
// lastIndexOf() of lists, sets.contains/equivalent/intersects — do work that grows with the
// value's deep size (every element of every nested list and map) and, on strings, with the
// characters compared; cel-go charges them by the top-level size, after they ran. A value can
// reuse one inner list ([x, x]), so k map(x, [x, x]) steps build 2^k elements for a cost of
// ~k. Each of them is therefore checked before it runs: the deep size of the arguments it
// walks, counted by a walk that stops past the per-call limit; its charge (below), which must
// be within the per-call limit; and the characters of the strings it compares
// (MaxCompareChars). Past any of them the call fails closed, naming the function. A call on
// nested values is charged its deep size (the pairwise ones their node comparisons), a call
// on flat ones the library's charge.

// MaxCompareChars bounds the characters of strings one comparing call compares (memequal at
// tens of GB/s: a few tens of milliseconds).
const MaxCompareChars = 1 << 28

// deepCall is one overload whose work grows with its arguments' deep size.
type deepCall struct {
	// function is the CEL name, overload the library's overload ID.
	function, overload string
	// charge is its run-time charge.
	charge deepChargeFunc
	// searched, when set, is the one argument the call's work is bounded by: includes(),
	// indexOf() and lastIndexOf() compare their element with the list's elements, each
	// comparison stopping at the list element's end (a size differs), so the guard walks the
	// list only, not the element (which a deep charge pays for: searchCharge).
	searched bool
	// chars bounds the characters of strings the call compares.
	chars func(args []ref.Val) uint64
}

// deepChargeFunc is the run-time charge of a deep call on args, whose deep sizes are within
// limit (deepArgsError); nil leaves it to the cost estimator (cel-go's default charge, or
// Kubernetes' library.CostEstimator for includes, indexOf and lastIndexOf).
type deepChargeFunc func(args []ref.Val, limit uint64) *uint64

// deepCalls are the deep overloads with a binding per overload (equality, which the
// interpreter plans itself, and `in`, bound once for all its overloads, are checked by
// checkedOperator).
var deepCalls = []deepCall{
	{"distinct", "list_distinct", distinctCharge, false, func(a []ref.Val) uint64 { return saturatingMul(listSize(a[0]), elementChars(a[0])) }},
	{"flatten", "list_flatten", linearCharge, false, noChars},
	{"flatten", "list_flatten_int", linearCharge, false, noChars},
	{"includes", "list_includes_dyn_dyn", searchCharge, true, searched},
	{"indexOf", "list_a_index_of_int", searchCharge, true, searched},
	{"lastIndexOf", "list_a_last_index_of_int", searchCharge, true, searched},
	{"sets.contains", "list_sets_contains_list", setsCharge(1), false, pairChars(1)},
	{"sets.equivalent", "list_sets_equivalent_list", setsCharge(2), false, pairChars(2)},
	{"sets.intersects", "list_sets_intersects_list", setsCharge(1), false, pairChars(1)},
}

// noChars: the call compares no strings.
func noChars([]ref.Val) uint64 { return 0 }

// searched bounds the characters a list search (args[0] the list, args[1] the element)
// compares.
func searched(args []ref.Val) uint64 { return searchChars(args[0], args[1]) }

// deepSize counts the nodes of v — itself, and every element, key and value of the lists
// and maps it nests, and the value an optional holds (types.Optional.Equal compares it in
// full) — and stops counting once the count passes limit (the result is then limit+1).
// An object counts one plus its parts (goParts); other values (scalars) count one.
func deepSize(v ref.Val, limit uint64) uint64 {
	n := uint64(0)
	var walk func(ref.Val)
	walk = func(v ref.Val) {
		if n > limit {
			return
		}
		n++
		switch c := v.(type) {
		case traits.Lister:
			size, _ := c.Size().(types.Int)
			for i := types.Int(0); i < size && n <= limit; i++ {
				walk(c.Get(i))
			}
		case traits.Mapper:
			for it := c.Iterator(); it.HasNext() == types.True && n <= limit; {
				k := it.Next()
				walk(k)
				walk(c.Get(k))
			}
		case *types.Optional:
			if c.HasValue() {
				walk(c.GetValue())
			}
		default:
			if !leafValue(v) { // an object: its equality is reflect.DeepEqual of its Go value
				n = addSaturating(n, goParts(reflect.ValueOf(v.Value()), limit-min(n, limit)))
			}
		}
	}
	walk(v)
	return min(n, limit+1)
}

// goParts counts the parts of the Go value r that reflect.DeepEqual compares — each exported
// field of a struct, element of a slice, key and value of a map, at any depth — not r
// itself; it stops counting past limit. An input object (a *VM) or one a policy builds
// (`evaluator.Holders{vms: l}`) holds lists and maps.
func goParts(r reflect.Value, limit uint64) uint64 {
	n := uint64(0)
	var walk func(reflect.Value)
	walk = func(r reflect.Value) {
		for r.Kind() == reflect.Pointer || r.Kind() == reflect.Interface {
			if r.IsNil() {
				return
			}
			r = r.Elem()
		}
		switch r.Kind() {
		case reflect.Struct:
			for i := 0; i < r.NumField() && n <= limit; i++ {
				if r.Type().Field(i).IsExported() {
					n++
					walk(r.Field(i))
				}
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < r.Len() && n <= limit; i++ {
				n++
				walk(r.Index(i))
			}
		case reflect.Map:
			for it := r.MapRange(); it.Next() && n <= limit; {
				n += 2
				walk(it.Key())
				walk(it.Value())
			}
		}
	}
	walk(r)
	return n
}

// leafValue reports whether v is a value whose equality compares no list, map or object in
// time that grows with it: a CEL primitive, a fixed-size value of the Kubernetes libraries
// (IP, CIDR, Quantity, Format), or an optional of one (its strings are charged by their
// length, byteLen). Lists, maps, objects and optionals of them are not: their Equal walks what
// they hold. Nor are a Semver (its equality compares every pre-release identifier) and a URL
// (re-serialized to compare): in a collection they count their Go parts (goParts), as an
// object does.
func leafValue(v ref.Val) bool {
	switch v.(type) {
	case types.Bool, types.Int, types.Uint, types.Double, types.String, types.Bytes, types.Null,
		types.Duration, types.Timestamp, *types.Type, *types.Err, *types.Unknown,
		apiservercel.IP, apiservercel.CIDR, apiservercel.Quantity, apiservercel.Format:
		return true
	case *types.Optional: // optional.none(), or an optional of a leaf: compared as a leaf
		o := v.(*types.Optional)
		return !o.HasValue() || leafValue(o.GetValue())
	}
	return false
}

// unwrapped is v without the optionals around it (what an optional's equality compares),
// and whether there were any.
func unwrapped(v ref.Val) (ref.Val, bool) {
	wrapped := false
	for {
		o, ok := v.(*types.Optional)
		if !ok || !o.HasValue() {
			return v, wrapped
		}
		v, wrapped = o.GetValue(), true
	}
}

// nested reports whether v, seen through the optionals around it, is a list or map holding
// a value that is not a leafValue (a list, a map, an optional of a value, an object), or is
// an optional of an object. Such a value is charged its deep size; a flat one (a list or map
// of scalars, or an optional of one) the library's charge.
func nested(v ref.Val) bool {
	u, wrapped := unwrapped(v)
	switch c := u.(type) {
	case traits.Lister:
		size, _ := c.Size().(types.Int)
		for i := types.Int(0); i < size; i++ {
			if !leafValue(c.Get(i)) {
				return true
			}
		}
	case traits.Mapper:
		for it := c.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			if !leafValue(k) || !leafValue(c.Get(k)) {
				return true
			}
		}
	default:
		return wrapped && !leafValue(u) // an optional of an object
	}
	return false
}

// deepArgsError is why a deep call must not run on args: an argument deeper than limit.
func deepArgsError(function string, args []ref.Val, limit uint64) ref.Val {
	for _, a := range args {
		if deepSize(a, limit) > limit {
			return types.WrapErr(fmt.Errorf("%s: an argument holds more than %d elements counting its nested lists and maps, "+
				"beyond what one call may walk within the per-call cost limit", function, limit))
		}
	}
	return nil
}

// anyNested reports whether one of args nests lists or maps.
func anyNested(args []ref.Val) bool {
	for _, a := range args {
		if nested(a) {
			return true
		}
	}
	return false
}

// linearCharge charges a call that compares each node of its arguments at most once: the
// sum of their deep sizes when one nests lists or maps, nil (the library's charge) otherwise.
func linearCharge(args []ref.Val, limit uint64) *uint64 {
	if !anyNested(args) {
		return nil
	}
	cost := uint64(0)
	for _, a := range args {
		cost = addSaturating(cost, deepSize(a, limit))
	}
	return &cost
}

// searchCharge charges a search of a list (args[0]) for an element (args[1]), `in` a list
// and includes(), indexOf(), lastIndexOf(): the list's deep size plus one when the list nests
// lists or maps, nil (the flat charge) otherwise. Each comparison stops at the list element's
// end, so the comparisons together walk at most the list, whatever the element holds.
func searchCharge(args []ref.Val, limit uint64) *uint64 {
	if len(args) != 2 || !nested(args[0]) {
		return nil
	}
	cost := addSaturating(deepSize(args[0], limit), 1)
	return &cost
}

// comparable reports whether == or != may compare a's and b's elements: both lists, or both
// maps, of one size; otherwise equality answers after looking at their sizes (or kinds), and
// neither the guards nor the charges walk them (a list of 99,000 ints == [1, i] was walked
// whole, uncharged). Scalars are comparable (nothing to walk).
func comparable(a, b ref.Val) bool {
	_, la := a.(traits.Lister)
	_, lb := b.(traits.Lister)
	_, ma := a.(traits.Mapper)
	_, mb := b.(traits.Mapper)
	switch {
	case la != lb || ma != mb:
		return false
	case la || ma:
		return listSize(a) == listSize(b)
	}
	return true
}

// pairsCharge is the charge of sets.contains or sets.intersects (directions 1) or
// sets.equivalent (2) on nested lists a and b of na and nb elements and deep sizes da and
// db: one direction compares each element of b with the elements of a (or the reverse, for
// intersects), each comparison walking at most the smaller of the two elements, so at most
// min(nb × da, na × db) node comparisons; plus the walk of both, da + db. Saturating; the
// estimate does not see it.
func pairsCharge(directions, na, da, nb, db uint64) uint64 {
	pairs := min(saturatingMul(nb, da), saturatingMul(na, db))
	return addSaturating(saturatingMul(directions, pairs), addSaturating(da, db))
}

// selfPairsCharge is the charge of distinct() on a nested list of n elements and deep size
// d: each element is compared with the ones kept so far, together at most the list, so at
// most n × d node comparisons; plus the walk, d. Saturating.
func selfPairsCharge(n, d uint64) uint64 {
	return addSaturating(saturatingMul(n, d), d)
}

// setsCharge charges sets.contains, sets.intersects (directions 1) and sets.equivalent (2):
// pairsCharge when an operand nests, else cel-go's own charge (ext/sets.go trackSetsCost,
// which this tracker replaces): 1 + directions × |a| × |b|.
func setsCharge(directions uint64) deepChargeFunc {
	return func(args []ref.Val, limit uint64) *uint64 {
		a, b := args[0], args[1]
		na, nb := listSize(a), listSize(b)
		cost := addSaturating(1, saturatingMul(directions, saturatingMul(na, nb)))
		if anyNested(args) {
			cost = pairsCharge(directions, na, deepSize(a, limit), nb, deepSize(b, limit))
		}
		return &cost
	}
}

// distinctCharge charges distinct(): selfPairsCharge when the list nests, else cel-go's own
// charge (ext/lists.go trackListSelfCompare, which this tracker replaces): 2 × n² (2.1 × n²
// for strings and bytes) + 11.
func distinctCharge(args []ref.Val, limit uint64) *uint64 {
	l := args[0]
	n := listSize(l)
	if nested(l) {
		cost := selfPairsCharge(n, deepSize(l, limit))
		return &cost
	}
	square := saturatingMul(n, n)
	cost := addSaturating(saturatingMul(square, 2), 11)
	if lister, ok := l.(traits.Lister); ok && n > 0 {
		first, _ := unwrapped(lister.Get(types.IntZero))
		switch first.Type() {
		case types.StringType, types.BytesType:
			cost = addSaturating(cost, square/10)
		}
	}
	return &cost
}

// deepCallError is why the deep call d must not run on args: an argument deeper than limit
// (deepArgsError), a charge beyond it — the call would be stopped after doing the work — or
// more characters compared than MaxCompareChars.
func deepCallError(d deepCall, args []ref.Val, limit uint64) ref.Val {
	walked := args
	if d.searched {
		walked = args[:1]
	}
	if err := deepArgsError(d.function, walked, limit); err != nil {
		return err
	}
	if cost := d.charge(args, limit); cost != nil && *cost > limit {
		return types.WrapErr(fmt.Errorf("%s: comparing its arguments' elements would cost %d, beyond the per-call "+
			"cost limit %d", d.function, *cost, limit))
	}
	return charsError(d.function, d.chars(args))
}

// charsError is the error of a call comparing chars characters of strings, beyond
// MaxCompareChars; nil within.
func charsError(function string, chars uint64) ref.Val {
	if chars <= MaxCompareChars {
		return nil
	}
	return types.WrapErr(fmt.Errorf("%s: it would compare up to %d characters of strings, at most %d",
		strings.Trim(function, "_@"), chars, MaxCompareChars))
}

// byteLen is the length of a string or bytes value, or of one behind optionals (which
// compare what they hold); 0 for other values.
func byteLen(v ref.Val) uint64 {
	v, _ = unwrapped(v)
	switch s := v.(type) {
	case types.String:
		return uint64(len(s))
	case types.Bytes:
		return uint64(len(s))
	}
	return 0
}

// elementChars is the characters of the strings and bytes a list or map (keys and values)
// holds at its top level.
func elementChars(v ref.Val) uint64 {
	chars := uint64(0)
	switch c := v.(type) {
	case traits.Lister:
		for it := c.Iterator(); it.HasNext() == types.True; {
			chars = addSaturating(chars, byteLen(it.Next()))
		}
	case traits.Mapper:
		for it := c.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			chars = addSaturating(chars, addSaturating(byteLen(k), byteLen(c.Get(k))))
		}
	}
	return chars
}

// searchChars bounds the characters a search of list l for x compares: each element's
// comparison stops at the shorter of the two.
func searchChars(l, x ref.Val) uint64 {
	lister, ok := l.(traits.Lister)
	nx := byteLen(x)
	if !ok || nx == 0 {
		return 0
	}
	chars := uint64(0)
	for it := lister.Iterator(); it.HasNext() == types.True; {
		chars = addSaturating(chars, min(nx, byteLen(it.Next())))
	}
	return chars
}

// pairChars bounds the characters comparing every element of a with every element of b may
// compare, directions times.
func pairChars(directions uint64) func(args []ref.Val) uint64 {
	return func(args []ref.Val) uint64 {
		a, b := args[0], args[1]
		one := min(saturatingMul(listSize(a), elementChars(b)), saturatingMul(listSize(b), elementChars(a)))
		return saturatingMul(directions, one)
	}
}

// equalChars bounds the characters `a == b` compares: the elements at common indexes of two
// lists, the smaller map's keys and values.
func equalChars(a, b ref.Val) uint64 {
	a, _ = unwrapped(a)
	b, _ = unwrapped(b)
	la, okA := a.(traits.Lister)
	lb, okB := b.(traits.Lister)
	if okA && okB {
		chars := uint64(0)
		for i := types.Int(0); i < types.Int(min(listSize(a), listSize(b))); i++ {
			chars = addSaturating(chars, min(byteLen(la.Get(i)), byteLen(lb.Get(i))))
		}
		return chars
	}
	return min(elementChars(a), elementChars(b))
}

// equalCharge is the run-time charge of `==` or `!=`: linearCharge when an operand nests,
// the library's otherwise.
func equalCharge(args []ref.Val, limit uint64) *uint64 {
	if len(args) == 2 && !comparable(args[0], args[1]) {
		return nil
	}
	return linearCharge(args, limit)
}

// inListCharge is the run-time charge of `x in l`: searchCharge when l nests, the library's
// otherwise.
func inListCharge(args []ref.Val, limit uint64) *uint64 {
	if len(args) != 2 {
		return nil
	}
	if _, ok := args[1].(traits.Lister); ok {
		return searchCharge([]ref.Val{args[1], args[0]}, limit)
	}
	return linearCharge(args, limit)
}

// deepCharges charges the comparing calls on nested values: equality and `in` by the nodes
// they walk, the others by their deepCall's charge.
func (c Config) deepCharges() cel.ProgramOption {
	limit := c.PerCallLimit
	var opts []interpreter.CostTrackerOption
	for _, id := range []string{overloads.Equals, overloads.NotEquals} {
		opts = append(opts, interpreter.OverloadCostTracker(id, func(args []ref.Val, _ ref.Val) *uint64 {
			return equalCharge(args, limit)
		}))
	}
	opts = append(opts, interpreter.OverloadCostTracker(overloads.InList, func(args []ref.Val, _ ref.Val) *uint64 {
		return inListCharge(args, limit)
	}))
	for _, d := range deepCalls {
		opts = append(opts, interpreter.OverloadCostTracker(d.overload, func(args []ref.Val, _ ref.Val) *uint64 {
			return d.charge(args, limit)
		}))
	}
	return cel.CostTrackerOptions(opts...)
}

// deepOverloads rebinds each deep overload with deepCallError in front, as guardedOverloads
// does.
func (c Config) deepOverloads(base *cel.Env) ([]cel.EnvOption, error) {
	var opts []cel.EnvOption
	for _, d := range deepCalls {
		found, err := rebind(base, d.function, []string{d.overload}, func(orig *functions.Overload) cel.OverloadOpt {
			return c.guarded(orig, func(args []ref.Val) ref.Val { return deepCallError(d, args, c.PerCallLimit) })
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("deep overload %s is not in the environment", d.overload)
		}
		opts = append(opts, found...)
	}
	return opts, nil
}

// checkedOperator is `==`, `!=` or `in` (the interpreter's own call, whose Args, Function
// and OverloadID the cost tracker reads) evaluated with the deep-size and characters checks
// first: the interpreter plans equality itself, and `in` has one binding for all overloads.
type checkedOperator struct {
	interpreter.InterpretableCall
	limit uint64
}

// Exec evaluates both operands, as the interpreter does, checks what comparing them walks
// and applies the operator.
func (c *checkedOperator) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	args := c.Args()
	l := args[0].Exec(frame)
	if types.IsError(l) {
		return l
	}
	r := args[1].Exec(frame)
	if types.IsError(r) {
		return r
	}
	var unk *types.Unknown
	unk, _ = types.MaybeMergeUnknowns(l, unk)
	unk, _ = types.MaybeMergeUnknowns(r, unk)
	if unk != nil {
		return unk
	}
	if err := c.check(l, r); err != nil {
		return err
	}
	switch c.Function() {
	case operators.In:
		if container, ok := r.(traits.Container); ok {
			return container.Contains(l)
		}
		return types.NoSuchOverloadErr()
	case operators.NotEquals:
		return types.Bool(types.Equal(l, r) != types.True)
	}
	return types.Equal(l, r)
}

// check is why applying the operator to l and r must not run, or nil. `in` a map looks one
// key up: only `in` a list walks its elements, and only them (each comparison with l stops at
// the element's end); == and != of collections whose sizes differ compare nothing.
func (c *checkedOperator) check(l, r ref.Val) ref.Val {
	_, isMap := r.(traits.Mapper)
	switch {
	case c.Function() == operators.In && isMap:
		return nil
	case c.Function() == operators.In:
		if err := deepArgsError(c.Function(), []ref.Val{r}, c.limit); err != nil {
			return err
		}
		return charsError(c.Function(), searchChars(r, l))
	case !comparable(l, r):
		return nil
	}
	if err := deepArgsError(c.Function(), []ref.Val{l, r}, c.limit); err != nil {
		return err
	}
	return charsError(c.Function(), equalChars(l, r))
}

// Eval implements interpreter.Interpretable.
func (c *checkedOperator) Eval(ctx interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(ctx))
}
