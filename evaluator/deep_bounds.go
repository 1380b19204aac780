package evaluator

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// The static side of deep.go. An operation that walks its operands deeply is charged at run
// time by their deep size (deepCharge) whenever one nests lists or maps, but cel-go's
// estimate sizes a value by its top level only: `e.exists(z, z in e)` over
// e = vm.labels.map(k, [k, k]).map(x, [x, x]).map(y, [y, y]) was estimated at a few
// thousand units and charged ~1,000,000 at run time on 256 labels, so a policy the webhook
// admitted failed closed on cost on an input within its bounds. deepCharges estimates what
// the run time charges: for each deep operation whose operands nest (or may: dyn), the deep
// size of each operand derived from the expression (varBound.deep: literals, inputs, map and
// filter over a bounded range, concatenation, conditionals, indexing), times the iterations
// of the comprehensions around it; exprChecked adds it to the expression's estimate, so
// that one whose deep operations can exceed the per-call limit is refused when written. An
// operand whose deep size cannot be derived is refused in a new expression, naming it.

// deepSum accumulates the deep size of a list or map literal: its own node plus each entry's.
type deepSum struct {
	deep, elemDeep uint64
	known          bool
}

func newDeepSum() *deepSum { return &deepSum{deep: 1, known: true} }

// add counts the entry e (bound b); value: it is an element or a map value (not a key), whose
// deep size bounds the literal's elements'.
func (s *deepSum) add(env boundEnv, e ast.Expr, b varBound, value bool) {
	d, ok := deepOf(env, e, b)
	if !ok {
		s.known = false
		return
	}
	s.deep = addSaturating(s.deep, d)
	if value {
		s.elemDeep = max(s.elemDeep, d)
	}
}

// result is the literal's deep size and its elements' (0, 0 when an entry's is unknown).
func (s *deepSum) result() (uint64, uint64) {
	if !s.known {
		return 0, 0
	}
	return s.deep, s.elemDeep
}

// eitherBound bounds a value that is x or y.
func eitherBound(x, y varBound) varBound {
	b := varBound{size: max(x.size, y.size), elem: max(x.elem, y.elem)}
	if x.deep > 0 && y.deep > 0 {
		b.deep = max(x.deep, y.deep)
		if elemsKnown(x) && elemsKnown(y) {
			b.elemDeep = max(x.elemDeep, y.elemDeep)
		}
	}
	return b
}

// elemsKnown: b's elements' deep size is known, or b's value has no elements (deep 1).
func elemsKnown(b varBound) bool { return b.elemDeep > 0 || b.deep == 1 }

// deepOf bounds the deep size of e's value, whose bound is b: b.deep when derived, an input's
// from its Go type (flat lists and maps of strings; an object counts one, as deepSize counts
// it), else from e's type (deepFromType); false when none says (a computed value of type dyn).
func deepOf(env boundEnv, e ast.Expr, b varBound) (uint64, bool) {
	d, ok := valueDeepOf(env, e, b)
	return addSaturating(d, optionalLayers(env.a.GetType(e.ID()))), ok
}

// optionalLayers is how many optionals wrap a value of type t, each a node deepSize counts
// around the value (a bound derived through optional.of(x) is x's).
func optionalLayers(t *types.Type) uint64 {
	n := uint64(0)
	for ; t != nil && isOptional(t); t = t.Parameters()[0] {
		n++
	}
	return n
}

// isOptional: t is optional_type(x).
func isOptional(t *types.Type) bool {
	return t.Kind() == types.OpaqueKind && t.TypeName() == "optional_type" && len(t.Parameters()) == 1
}

// withoutOptionals is t without the optional types around it: what an optional's equality
// compares.
func withoutOptionals(t *types.Type) *types.Type {
	for t != nil && isOptional(t) {
		t = t.Parameters()[0]
	}
	return t
}

// valueDeepOf is deepOf without the optionals around e's value.
func valueDeepOf(env boundEnv, e ast.Expr, b varBound) (uint64, bool) {
	if b.deep > 0 {
		return b.deep, true
	}
	if b.input != nil { // an input or a part of one, of flat Go types (input.go) whatever its CEL type
		switch b.input.kind() {
		case reflect.Map:
			return addSaturating(1, saturatingMul(b.size, 2)), true
		case reflect.Slice:
			return addSaturating(1, b.size), true
		case reflect.Invalid:
			return 0, false
		case reflect.Struct: // an input object: itself and its parts (deep.go goParts)
			t, _, _, _ := walkInput(b.input.typ, b.input.steps)
			parts, ok := goTypeParts(t, 0)
			return addSaturating(1, parts), ok
		}
		return 1, true
	}
	t := withoutOptionals(env.a.GetType(e.ID()))
	if t == nil {
		return 0, false
	}
	if b.elemDeep > 0 && isCollection(t) {
		per := b.elemDeep
		if t.Kind() == types.MapKind {
			per = addSaturating(per, 1) // the key
		}
		return addSaturating(1, saturatingMul(b.size, per)), true
	}
	return deepFromType(t, b.size, b.elem)
}

// deepFromType bounds the deep size of a value of type t holding at most size entries, each
// nested collection at most elem: a scalar or object 1, a list 1 + size × its element's, a map
// 1 + size × (1 + its value's), an optional 1 + its value's; false for dyn, whose shape the
// type does not say.
func deepFromType(t *types.Type, size, elem uint64) (uint64, bool) {
	switch {
	case unknownShape(t):
		return 0, false
	case isOptional(t):
		d, ok := deepFromType(t.Parameters()[0], size, elem)
		return addSaturating(1, d), ok
	case t.Kind() == types.StructKind && !libraryScalar(t), comparedByParts(t):
		// An object not read from an input, or a semver or URL: what it holds has no bound
		// here (deep.go leafValue).
		return 0, false
	case t.Kind() == types.ListKind && len(t.Parameters()) == 1:
		d, ok := deepFromType(t.Parameters()[0], elem, elem)
		return addSaturating(1, saturatingMul(size, d)), ok
	case t.Kind() == types.MapKind && len(t.Parameters()) == 2:
		d, ok := deepFromType(t.Parameters()[1], elem, elem)
		return addSaturating(1, saturatingMul(size, addSaturating(d, 1))), ok
	}
	return 1, true
}

// goTypeParts bounds goParts (deep.go) on a value of the input Go type t from the maxSize
// tags: each exported field of a struct one plus its parts, a slice of at most size elements
// size × (1 + an element's), a map size × (2 + a key's + a value's); false for a slice or map
// without a bound.
func goTypeParts(t reflect.Type, size uint64) (uint64, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		n := uint64(0)
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			parts, ok := goTypeParts(f.Type, sizeTag(f, "maxSize"))
			if !ok {
				return 0, false
			}
			n = addSaturating(n, addSaturating(1, parts))
		}
		return n, true
	case reflect.Slice, reflect.Array, reflect.Map:
		if size == 0 {
			return 0, false
		}
		per, ok := goTypeParts(t.Elem(), 0)
		own := uint64(1)
		if t.Kind() == reflect.Map {
			key, okKey := goTypeParts(t.Key(), 0)
			per, ok, own = addSaturating(per, key), ok && okKey, 2
		}
		return saturatingMul(size, addSaturating(own, per)), ok
	}
	return 0, true
}

// deepOperation is one call the estimate charges by deep size, named with its position.
type deepOperation struct {
	what string
	// charge is the deep size of its operands, iterations how often it may run.
	charge, iterations uint64
	// flat: a comparison of flat values (compare_charges.go), whose charge counts the
	// characters it compares (compareCharsPerUnit a unit) and elements, not nested values.
	flat bool
}

// deepCharges is what the run time charges the deep operations of the checked expression a
// beyond its estimate: the deep sizes of their operands times their iterations, summed
// (saturating), with the accesses cel-go charges beyond its estimate (attributeCharge); the
// deep operations charged, most expensive first; and the operations whose operands' deep
// size cannot be derived, each named with the reason.
func deepCharges(a *ast.AST, vars map[string]varBound) (uint64, []deepOperation, []string) {
	w := deepWalkOf(a, vars, 0)
	return w.total, w.ops, w.unbounded
}

// deepWalkOf walks the checked expression a, its deep operations sorted most expensive first,
// recording in long the comprehensions whose range may hold more than maxRange elements
// (none when maxRange is 0).
func deepWalkOf(a *ast.AST, vars map[string]varBound, maxRange uint64) *deepWalk {
	w := &deepWalk{a: a, maxRange: maxRange}
	w.walk(boundEnv{a: a, vars: vars}, a.Expr(), 1, true)
	sort.SliceStable(w.ops, func(i, j int) bool {
		return saturatingMul(w.ops[i].charge, w.ops[i].iterations) > saturatingMul(w.ops[j].charge, w.ops[j].iterations)
	})
	return w
}

// logicalNodeCharge is what one evaluation of `&&`, `||` or `?:` inside a comprehension is
// charged, by the estimate and — as the expression's uncharged part — at run time: cel-go
// charges them 0, but its cost tracker searches its value stack for each operand they drop
// (interpreter/runtimecost.go), and that stack grows with a comprehension's iterations. A
// body of 600 `true &&` terms over 512 elements was charged ~4 units an iteration for ~0.2 ms
// of work (~0.5 µs a term, ~1.7 units at the calibrated ~0.32 µs; issue #15).
const logicalNodeCharge = 2

type deepWalk struct {
	a         *ast.AST
	total     uint64
	ops       []deepOperation
	unbounded []string
	// maxRange, when set, is Limits.ComprehensionRange: long collects the comprehensions
	// whose range may hold more elements, or has no derived size.
	maxRange uint64
	long     []string
	// uncharged is the part of total cel-go does not charge at run time (the logical nodes
	// in comprehensions): the run time adds it to what the expression is charged.
	uncharged uint64
	// depth is how many values are pending on cel-go's cost tracker stack beneath the node
	// walked: the earlier elements of the literals and arguments of the calls enclosing it.
	depth uint64
	// steps are the comprehensions' loop steps: a macro's `__result__ && body` (all),
	// `__result__ || body` (exists) or `cond ? … : __result__` (filter, exists_one) is its
	// accumulation, whose work the calibration measures; the nodes of the body are charged.
	steps map[int64]bool
}

// logicalNode: the function is `&&`, `||` or `?:`, which cel-go charges 0.
func logicalNode(function string) bool {
	return function == operators.LogicalAnd || function == operators.LogicalOr || function == operators.Conditional
}

// checkRange records c as too long when maxRange is set and its range may hold more than
// maxRange elements, or has no size the analysis can derive.
func (w *deepWalk) checkRange(c ast.ComprehensionExpr, size uint64, known bool) {
	switch {
	case w.maxRange == 0:
	case !known:
		w.long = append(w.long, fmt.Sprintf("the comprehension over %s iterates over a range of no size the estimate can "+
			"derive, and a comprehension may iterate over at most %d elements (its work grows with the square of its "+
			"iterations): iterate over inputs, literals, or values built from them", operandName(w.a, c.IterRange()), w.maxRange))
	case size > w.maxRange:
		w.long = append(w.long, fmt.Sprintf("the comprehension over %s iterates over up to %d elements, more than the %d "+
			"a comprehension may (its work grows with the square of its iterations): iterate over fewer, or split the range",
			operandName(w.a, c.IterRange()), size, w.maxRange))
	}
}

// walk visits e, which runs iterations times (known: the count is derived), binding the
// variables of the comprehensions it enters as comprehensionBound does.
func (w *deepWalk) walk(env boundEnv, e ast.Expr, iterations uint64, known bool) {
	switch e.Kind() {
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		w.walk(env, c.IterRange(), iterations, known)
		w.above(1, func() { w.walk(env, c.AccuInit(), iterations, known) })
		r, okRange := deriveBound(env, c.IterRange())
		inner, rangeSize, ok := comprehensionScope(env, c, r, okRange)
		w.checkRange(c, rangeSize, ok)
		loop := inner.with(c.AccuVar(), accumulatorBound(env, inner, c, r, okRange))
		if w.steps == nil {
			w.steps = map[int64]bool{}
		}
		w.steps[c.LoopStep().ID()] = true      // a macro's own accumulation, in the calibration
		w.steps[c.LoopCondition().ID()] = true // and its own condition (`true` for map, filter)
		// The range and the accumulator are pending on the stack through the loop.
		w.above(2, func() {
			w.walk(loop, c.LoopCondition(), saturatingMul(iterations, rangeSize), known && ok)
			w.walk(loop, c.LoopStep(), saturatingMul(iterations, rangeSize), known && ok)
			w.walk(loop, c.Result(), iterations, known)
		})
		return
	case ast.CallKind:
		w.access(e, iterations, known)
		call := e.AsCall()
		if logicalNode(call.FunctionName()) && !w.steps[e.ID()] {
			w.free(iterations, logicalNodeCharge)
		}
		w.searches(e, iterations)
		pending := uint64(0)
		if call.IsMemberFunction() {
			w.walk(env, call.Target(), iterations, known)
			pending++
		}
		for i, arg := range call.Args() {
			w.above(pending+uint64(i), func() { w.walk(env, arg, iterations, known) })
		}
		if operands, name := w.deepOperands(call); operands != nil {
			w.charge(env, e, name, operands, iterations, known)
		}
		// Nested or not, the strings compared are charged too (compare_charges.go).
		w.flatCompare(env, e, call, iterations, known)
		w.parsedCompare(env, call, iterations, known) // parsed_charges.go
		w.concatCharge(env, e, iterations)
	case ast.SelectKind:
		w.access(e, iterations, known)
		w.searches(e, iterations)
		w.walk(env, e.AsSelect().Operand(), iterations, known)
	case ast.IdentKind:
		w.searches(e, iterations)
	case ast.ListKind:
		if constantLiteral(e) {
			return // folded by the planner: built once, not per iteration
		}
		for i, el := range e.AsList().Elements() {
			w.above(uint64(i), func() { w.walk(env, el, iterations, known) })
		}
	case ast.MapKind:
		if constantLiteral(e) {
			return
		}
		for i, entry := range e.AsMap().Entries() {
			w.above(2*uint64(i), func() { w.walk(env, entry.AsMapEntry().Key(), iterations, known) })
			w.above(2*uint64(i)+1, func() { w.walk(env, entry.AsMapEntry().Value(), iterations, known) })
		}
	case ast.LiteralKind:
		if !w.steps[e.ID()] {
			w.free(iterations, literalCharge)
		}
	}
}

// constantLiteral: e is a literal, or a list or map literal of constant literals only, which
// cel-go's planner builds once (interpreter/planner.go: a constructor of constants is folded).
func constantLiteral(e ast.Expr) bool {
	switch e.Kind() {
	case ast.LiteralKind:
		return true
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			if !constantLiteral(el) {
				return false
			}
		}
		return true
	case ast.MapKind:
		for _, entry := range e.AsMap().Entries() {
			if !constantLiteral(entry.AsMapEntry().Key()) || !constantLiteral(entry.AsMapEntry().Value()) {
				return false
			}
		}
		return true
	}
	return false
}

// literalCharge is what one evaluation of a literal inside a comprehension is charged, by the
// estimate and at run time: cel-go charges a constant 0, and folds a list or map literal
// only when all its elements are constant, so that `[1, 1, …, 2,490 times, i]` evaluated
// every constant on every iteration for the literal's flat base cost (~15 µs a unit; issue
// #15). A list or map of constants only, which the planner folds, is not charged.
const literalCharge = 1

// stackEntriesPerUnit is how many entries of cel-go's cost tracker stack one unit pays for
// searching: a search reads ~0.85 ns an entry and a unit is calibrated at ~0.35–0.5 µs
// (BenchmarkCostCalibration), so 256 leaves a margin of about 2.
const stackEntriesPerUnit = 256

// above walks visit with pending more values beneath it on the cost tracker's stack.
func (w *deepWalk) above(pending uint64, visit func()) {
	w.depth += pending
	visit()
	w.depth -= pending
}

// searches charges the stack searches of node e, evaluated iterations times, by the values
// pending beneath it (whole units of stackEntriesPerUnit). cel-go's tracker searches the
// whole stack for the ID of each attribute it observes (an identifier, a select, an index:
// its own ID is not there yet) and for the branches and terms `?:`, `&&` and `||` did not
// evaluate (interpreter/runtimecost.go: drop). A literal's earlier elements are pending while
// the next is evaluated, so that the reads of `[i, i, …]` grow with its length squared.
func (w *deepWalk) searches(e ast.Expr, iterations uint64) {
	n := uint64(1)
	if e.Kind() == ast.CallKind {
		switch e.AsCall().FunctionName() {
		case operators.Index, operators.OptIndex:
		case operators.Conditional:
			n = 3
		case operators.LogicalAnd, operators.LogicalOr:
			n = uint64(len(e.AsCall().Args()))
		default:
			return
		}
	}
	w.free(iterations, saturatingMul(n, w.depth/stackEntriesPerUnit))
}

// free charges what cel-go does not, charge units an evaluation, to a node evaluated
// iterations times, when that is more than once (outside comprehensions an expression's
// nodes are bounded by its source): added to the estimate, and to the expression's run-time
// charge as its uncharged part, at its most iterations.
func (w *deepWalk) free(iterations, charge uint64) {
	if iterations <= 1 || charge == 0 {
		return
	}
	w.uncharged = addSaturating(w.uncharged, saturatingMul(iterations, charge))
	w.total = addSaturating(w.total, saturatingMul(iterations, charge))
}

// access adds what the run time charges the access e beyond cel-go's estimate
// (attributeCharge), times iterations. Unknown iterations leave the estimate unbounded
// already.
func (w *deepWalk) access(e ast.Expr, iterations uint64, known bool) {
	if n := attributeCharge(w.a, e); n > 0 && known {
		w.total = addSaturating(w.total, saturatingMul(n, iterations))
	}
}

// deepOperands are the operands of call when it is one of deep.go's operations on a list
// (equality, `in` a list, distinct, flatten, includes, indexOf, lastIndexOf, sets.*) and one
// of them nests lists or maps or may (dyn); nil otherwise.
func (w *deepWalk) deepOperands(call ast.CallExpr) ([]ast.Expr, string) {
	var operands []ast.Expr
	name := call.FunctionName()
	switch name {
	case operators.Equals, operators.NotEquals:
		operands = call.Args()
		name = strings.Trim(name, "_")
	case operators.In:
		if t := w.a.GetType(call.Args()[1].ID()); t != nil && t.Kind() != types.MapKind {
			operands = call.Args()
		}
		name = "in"
	case "distinct", "flatten", "includes", "indexOf", "lastIndexOf":
		if t := w.a.GetType(call.Target().ID()); call.IsMemberFunction() && t != nil && (t.Kind() == types.ListKind || unknownShape(t)) {
			operands = append([]ast.Expr{call.Target()}, call.Args()...)
		}
		name += "()"
	case "sets.contains", "sets.equivalent", "sets.intersects":
		operands = call.Args()
		name += "()"
	}
	for _, o := range operands {
		for _, alt := range seeThrough(o) {
			if t := w.a.GetType(alt.ID()); t != nil && mayNest(t) && !scalarThrough(w.a, alt) {
				return operands, name
			}
		}
	}
	return nil, ""
}

// mayNest: a value of type t may be what deep.go's nested() charges by its deep size — seen
// through the optionals around it, a list or map whose elements, keys or values are not of
// a leaf type (lists, maps, objects, optionals of them, dyn), a value of unknown shape
// (dyn), or an optional of an object. Before, a list of optionals of nested lists was flat to the
// estimate, as it was to the run time (issue #15).
func mayNest(t *types.Type) bool {
	u := withoutOptionals(t)
	switch {
	case unknownShape(u):
		return true
	case isCollection(u):
		for _, p := range u.Parameters() {
			if !leafType(p) {
				return true
			}
		}
		return false
	}
	return u != t && !leafType(u)
}

// leafType: a value of type t is a leafValue (deep.go): a primitive, a fixed-size value of
// the Kubernetes libraries, or an optional of one.
func leafType(t *types.Type) bool {
	if isOptional(t) {
		return leafType(t.Parameters()[0])
	}
	if comparedByParts(t) {
		return false
	}
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind, types.BytesKind,
		types.NullTypeKind, types.DurationKind, types.TimestampKind, types.TypeKind, types.ErrorKind:
		return true
	}
	return libraryScalar(t)
}

// scalarThrough: e, of type dyn, is a scalar all the same — arithmetic or a conditional over
// dyn() of scalars, each seen through (dyn(1) + dyn(2)): it nests nothing. Before, its
// dyn type made `dyn(1) + dyn(2) == dyn(3)` "nested lists and maps … no size".
func scalarThrough(a *ast.AST, e ast.Expr) bool {
	for _, alt := range seeThrough(e) {
		t := a.GetType(alt.ID())
		switch {
		case t == nil:
			return false
		case !unknownShape(t):
			if isCollection(t) || len(t.Parameters()) > 0 { // a list, a map, an optional of one
				return false
			}
		case alt.Kind() == ast.CallKind && arithmetic[alt.AsCall().FunctionName()]:
			for _, arg := range alt.AsCall().Args() {
				if !scalarThrough(a, arg) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// arithmetic are the operators whose result is a scalar when their operands are.
var arithmetic = map[string]bool{operators.Add: true, operators.Subtract: true, operators.Multiply: true,
	operators.Divide: true, operators.Modulo: true, operators.Negate: true}

// charge adds the deep size of operands, times iterations, to the total; or records why it
// cannot.
func (w *deepWalk) charge(env boundEnv, e ast.Expr, name string, operands []ast.Expr, iterations uint64, known bool) {
	loc := w.a.SourceInfo().GetStartLocation(e.ID())
	what := fmt.Sprintf("%s at %d:%d", name, loc.Line(), loc.Column()+1)
	deeps, sizes := make([]uint64, len(operands)), make([]uint64, len(operands))
	for i, o := range operands {
		ok := false
		for _, alt := range seeThrough(o) {
			b, okAlt := deriveBound(env, alt)
			var da uint64
			if okAlt {
				da, okAlt = deepOf(env, alt, b)
			}
			if okAlt && b.parts && optionalLayers(env.a.GetType(alt.ID())) == 0 {
				da = 1 // a bare Semver or URL: the run time walks collections and optionals only
			}
			if !okAlt {
				ok = false
				break
			}
			deeps[i], sizes[i], ok = max(deeps[i], da), max(sizes[i], entriesWithin(b, da)), true
		}
		if !ok {
			w.unbounded = append(w.unbounded, fmt.Sprintf("%s: the nested lists and maps of %s have no size the "+
				"estimate can derive, and %s walks all of them", what, operandName(w.a, o), name))
			return
		}
	}
	charge := staticDeepCharge(name, deeps, sizes)
	if !known {
		w.unbounded = append(w.unbounded, fmt.Sprintf("%s walks nested lists and maps in a comprehension over a "+
			"range whose size the estimate cannot derive", what))
		return
	}
	w.ops = append(w.ops, deepOperation{what: what, charge: charge, iterations: iterations})
	w.total = addSaturating(w.total, saturatingMul(charge, iterations))
}

// entriesWithin bounds the entries of a value of bound b and deep size at most deep: b.size
// when derived, and never more than deep - 1 (each entry is at least one node of it).
func entriesWithin(b varBound, deep uint64) uint64 {
	n := max(deep, 1) - 1
	if b.size > 0 {
		n = min(n, b.size)
	}
	return n
}

// staticDeepCharge is what deep.go charges the operation name at most on operands of deep
// sizes deeps and entries sizes: pairsCharge for sets.*, selfPairsCharge for distinct(), the
// sum of the deep sizes for the others.
func staticDeepCharge(name string, deeps, sizes []uint64) uint64 {
	switch {
	case name == "sets.equivalent()" && len(deeps) == 2:
		return pairsCharge(2, sizes[0], deeps[0], sizes[1], deeps[1])
	case (name == "sets.contains()" || name == "sets.intersects()") && len(deeps) == 2:
		return pairsCharge(1, sizes[0], deeps[0], sizes[1], deeps[1])
	case name == "distinct()" && len(deeps) == 1:
		return selfPairsCharge(sizes[0], deeps[0])
	}
	charge := uint64(0)
	for _, d := range deeps {
		charge = addSaturating(charge, d)
	}
	return charge
}

// operandName is o's source when it unparses, else "its operand".
func operandName(a *ast.AST, o ast.Expr) string {
	if p, ok := readName(o); ok {
		return p
	}
	loc := a.SourceInfo().GetStartLocation(o.ID())
	return fmt.Sprintf("the operand at %d:%d", loc.Line(), loc.Column()+1)
}

// deepHint names the deep operations that cost most, for the error of an estimate they
// pushed past its limit.
func deepHint(ops []deepOperation) string {
	var parts []string
	for i, op := range ops {
		if i == 2 {
			break
		}
		s := fmt.Sprintf("%s walks or compares up to %d nested elements, keys and values", op.what, op.charge)
		if op.flat {
			// Before, a flat list of 64 strings read "up to 64769 nested elements".
			s = fmt.Sprintf("%s compares strings for up to %d units (a unit per %d characters compared)",
				op.what, op.charge, compareCharsPerUnit)
		}
		if op.iterations > 1 {
			s += fmt.Sprintf(" on each of up to %d iterations", op.iterations)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ") + ": compare or search flat values, or nest fewer or smaller lists"
}

// comparedByParts: t is a Kubernetes library type whose equality grows with the value
// (kubernetes.Semver, kubernetes.URL; k8s.io/apiserver pkg/cel), which deep.go's leafValue
// counts by its parts.
func comparedByParts(t *types.Type) bool {
	return t.TypeName() == "kubernetes.Semver" || t.TypeName() == "kubernetes.URL"
}
