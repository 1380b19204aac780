package evaluator

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// varBound bounds the value of a policy variable, derived from its expression at compile
// time (deriveBound): the static estimate sizes every expression reading the variable by it,
// and Decide holds the value to it at run time (checkVariableSize), which a value within the
// declared input bounds cannot exceed by construction. Before, every variable was assumed to
// hold at most 1,024 entries of at most 317 characters whatever it computed, so that
// `variables: [{name: anns, expression: vm.annotations}]` failed on any in-bounds annotation
// value longer than 317 characters.
type varBound struct {
	// size bounds the characters of a string (bytes of bytes) or the entries of a list or map.
	size uint64
	// elem bounds every element, key and value, at any depth (characters or entries).
	elem uint64
	// input, when set, is the input the value is (a path through the input types, e.g.
	// VM + [annotations]): the estimate sizes variables.x.rest as that input's rest, with its
	// own key and element bounds, and the run time checks nothing (the input bounds hold).
	input *typedPath
	// fixed: not derived (fixedVariableBound); the run time checks the elements too.
	fixed bool
	// deep bounds the value's deep size, what deep.go's operations walk (deepSize: itself and
	// every element, key and value of the lists and maps it nests), and elemDeep that of each
	// of its elements (map values); 0 when not derived, then deepOf derives them from the
	// type and size, elem (deep_bounds.go).
	deep, elemDeep uint64
	// parts: the value is a Semver or URL, whose deep is its parts (partsDeep): what a
	// collection holding it is charged for it, while compared bare it is one node (deep.go
	// nested: only collections and optionals are walked).
	parts bool
	// chars, when not 0, bounds the characters (bytes) of a list's string elements together,
	// where that is far below size × elem: the parts of split() hold no more than the
	// string split. Only the traversals of a flat list read it (stringListTraversal); a
	// derivation that builds a new bound leaves it 0.
	chars uint64
	// unbounded marks a name in scope whose value has no bound (an iteration variable over a
	// range that cannot be bounded, a bound accumulator whose initial value cannot): it shadows
	// an input or variable of the same name, and nothing derives from it. A zero varBound
	// there read as an empty value (issue #15, testers atk14, atk16).
	unbounded bool
}

// typedPath is a path from a Go input type through json field names and @items, @keys,
// @values steps, as the estimator walks it (typePathSize).
type typedPath struct {
	typ   reflect.Type
	steps []string
}

// fixedVariableBound is the bound of a variable whose expression the analysis cannot bound.
var fixedVariableBound = varBound{size: variableSizeBound, elem: variableElemBound, fixed: true}

func (b varBound) String() string {
	return fmt.Sprintf("%d entries or characters, each element, key or value at most %d", b.size, b.elem)
}

// boundEnv is what deriveBound knows: the checked AST (for types), the bounds of the
// variables declared before, and those of the comprehension variables in scope.
type boundEnv struct {
	a     *ast.AST
	vars  map[string]varBound
	scope map[string]varBound
}

func (env boundEnv) with(name string, b varBound) boundEnv {
	scope := make(map[string]varBound, len(env.scope)+1)
	for k, v := range env.scope {
		scope[k] = v
	}
	scope[name] = b
	env.scope = scope
	return env
}

// unsizedKinds are the result types whose values have no size to hold: checkVariableSize
// ignores them and the estimator sizes nothing through them.
var unsizedKinds = map[types.Kind]bool{
	types.BoolKind: true, types.IntKind: true, types.UintKind: true, types.DoubleKind: true,
	types.NullTypeKind: true, types.TimestampKind: true, types.DurationKind: true, types.TypeKind: true,
}

// deriveBound bounds what e evaluates to from the input bounds (the maxSize and elemMaxSize
// tags of input.go), literals, the bounds of earlier variables, and how the operators and
// functions it knows grow their operands: concatenation, conditionals, indexing, map and
// filter over a bounded range, the string functions, lists.range of a literal. false when
// it cannot.
func deriveBound(env boundEnv, e ast.Expr) (varBound, bool) {
	t := env.a.GetType(e.ID())
	if t != nil && unsizedKinds[t.Kind()] {
		return varBound{}, true
	}
	if t != nil && libraryScalar(t) {
		// No size of its own, one node to the deep operations; a URL or Semver is sized by
		// the text it was parsed from, which its methods' charges grow with (parsed_charges.go),
		// and counts its parts in a collection (partsDeep).
		size := parsedTextBound(env, e, t)
		return varBound{size: size, deep: partsDeep(t, size), parts: comparedByParts(t)}, true
	}
	return deriveShape(env, e)
}

// parsedTextBound bounds the characters of the text the URL or Semver value e was parsed
// from: the argument of url() or semver(), else what e's value is derived from (a variable,
// an element of a list, a branch), else the type's ceiling (parsedTextCeiling); 0 for
// another library value.
func parsedTextBound(env boundEnv, e ast.Expr, t *types.Type) uint64 {
	ceiling := parsedTextCeiling(t)
	if ceiling == 0 {
		return 0
	}
	source := e
	if e.Kind() == ast.CallKind {
		call := e.AsCall()
		if fn := call.FunctionName(); (fn == "url" || fn == "semver") && !call.IsMemberFunction() && len(call.Args()) > 0 {
			source = call.Args()[0]
		}
	}
	if b, ok := deriveShape(env, source); ok && b.size > 0 {
		return min(b.size, ceiling)
	}
	return ceiling
}

// deriveShape is deriveBound of an expression whose type has a size of its own.
func deriveShape(env boundEnv, e ast.Expr) (varBound, bool) {
	switch e.Kind() {
	case ast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.String:
			return varBound{size: uint64(len(v))}, true
		case types.Bytes:
			return varBound{size: uint64(len(v))}, true
		}
		return varBound{}, true
	case ast.ListKind:
		b := varBound{size: uint64(len(e.AsList().Elements()))}
		deep := newDeepSum()
		for _, el := range e.AsList().Elements() {
			eb, ok := deriveBound(env, el)
			if !ok {
				return varBound{}, false
			}
			b.elem = max(b.elem, eb.size, eb.elem)
			deep.add(env, el, eb, true)
		}
		b.deep, b.elemDeep = deep.result()
		return b, true
	case ast.MapKind:
		b := varBound{size: uint64(len(e.AsMap().Entries()))}
		deep := newDeepSum()
		for _, entry := range e.AsMap().Entries() {
			for i, x := range []ast.Expr{entry.AsMapEntry().Key(), entry.AsMapEntry().Value()} {
				eb, ok := deriveBound(env, x)
				if !ok {
					return varBound{}, false
				}
				b.elem = max(b.elem, eb.size, eb.elem)
				deep.add(env, x, eb, i == 1)
			}
		}
		b.deep, b.elemDeep = deep.result()
		return b, true
	case ast.IdentKind:
		if b, ok := env.scope[e.AsIdent()]; ok {
			return b, !b.unbounded
		}
		if typ, ok := inputVariables[e.AsIdent()]; ok {
			return inputBound(typedPath{typ: typ})
		}
	case ast.SelectKind:
		return selectBound(env, e)
	case ast.CallKind:
		return callBound(env, e)
	case ast.ComprehensionKind:
		return comprehensionBound(env, e)
	}
	return varBound{}, false
}

// libraryScalar: t is a value type of the Kubernetes CEL libraries, which holds no list or
// map: an IP or a CIDR (opaque types), a Quantity, URL, Semver or named format (object types
// "kubernetes.…", compared by their fields, not walked). Before, a variable holding a
// Quantity or a URL was "nested lists and maps … no size" to == and refused.
func libraryScalar(t *types.Type) bool {
	switch t.Kind() {
	case types.OpaqueKind:
		return t.TypeName() != "optional_type"
	case types.StructKind:
		return strings.HasPrefix(t.TypeName(), "kubernetes.")
	}
	return false
}

// selectBound bounds x.f: a variable, or a field of an input.
func selectBound(env boundEnv, e ast.Expr) (varBound, bool) {
	sel := e.AsSelect()
	if sel.IsTestOnly() {
		return varBound{}, true
	}
	op := sel.Operand()
	if op.Kind() == ast.IdentKind && op.AsIdent() == "variables" {
		b, ok := env.vars[sel.FieldName()]
		return b, ok
	}
	ob, ok := deriveBound(env, op)
	switch {
	case !ok:
		return varBound{}, false
	case ob.input != nil && ob.input.kind() == reflect.Map: // m.key reads a value
		return inputBound(ob.input.then("@values"))
	case ob.input != nil:
		return inputBound(ob.input.then(sel.FieldName()))
	case env.a.GetType(op.ID()) != nil && env.a.GetType(op.ID()).Kind() == types.MapKind:
		return varBound{size: ob.elem, elem: ob.elem}, true
	}
	return varBound{}, false
}

// maxInputSize bounds every string (characters) and collection (entries) an input holds, at
// any depth: the bound of an input object held in a collection, whose fields the estimate
// cannot follow through a variable (variables.v[0].annotations).
var maxInputSize = sync.OnceValue(func() uint64 {
	n := uint64(defaultKeySize)
	for _, f := range boundedFields() {
		n = max(n, f.bound, f.elem)
	}
	return n
})

func (p *typedPath) then(step string) typedPath {
	return typedPath{typ: p.typ, steps: append(append([]string(nil), p.steps...), step)}
}

// inputBound bounds the input at p from the tags: a string its maxSize, a list or map its
// maxSize entries of elements and keys at most their bounds, a struct nothing of its own
// (what is read through it is sized by its fields). false for a field without a bound.
func inputBound(p typedPath) (varBound, bool) {
	t, bound, elem, ok := walkInput(p.typ, p.steps)
	if !ok {
		return varBound{}, false
	}
	switch t.Kind() {
	case reflect.Struct:
		// Its own fields are read through the path; anything in it is at most maxInputSize,
		// which a collection holding it takes for its elements.
		return varBound{elem: maxInputSize(), input: &p}, true
	case reflect.String:
		if bound == 0 {
			return varBound{}, false
		}
		return varBound{size: bound, input: &p}, true
	case reflect.Slice, reflect.Map:
		if bound == 0 {
			return varBound{}, false
		}
		if t.Kind() == reflect.Map {
			elem = max(elem, defaultKeySize)
		}
		return varBound{size: bound, elem: elem, input: &p}, true
	}
	return varBound{input: &p}, true
}

// walkInput follows steps from t as the estimator does: the type reached, its maxSize (0:
// none) and the bound of its elements.
func walkInput(t reflect.Type, steps []string) (reflect.Type, uint64, uint64, bool) {
	bound, elem := uint64(0), uint64(defaultElemSize)
	for _, step := range steps {
		switch step {
		case "@items", "@values":
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Map {
				return nil, 0, 0, false
			}
			t, bound = t.Elem(), elem
		case "@keys":
			if t.Kind() != reflect.Map {
				return nil, 0, 0, false
			}
			t, bound = t.Key(), defaultKeySize
		default:
			f, found := fieldByJSONName(t, step)
			if !found {
				return nil, 0, 0, false
			}
			t, bound, elem = f.Type, sizeTag(f, "maxSize"), cmpOr(sizeTag(f, "elemMaxSize"), defaultElemSize)
		}
	}
	return t, bound, elem, true
}

// typePathSize is the estimator's size of the input at steps from t; nil when unbounded.
func typePathSize(t reflect.Type, steps []string) *checker.SizeEstimate {
	t, bound, _, ok := walkInput(t, steps)
	if !ok {
		return nil
	}
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		if bound == 0 {
			return nil
		}
		return &checker.SizeEstimate{Min: 0, Max: bound}
	}
	return nil
}

// callBound bounds the calls deriveBound knows.
func callBound(env boundEnv, e ast.Expr) (varBound, bool) {
	call := e.AsCall()
	args := call.Args()
	arg := func(i int) (varBound, bool) { return deriveBound(env, args[i]) }
	target := func() (varBound, bool) {
		if !call.IsMemberFunction() {
			return varBound{}, false
		}
		return deriveBound(env, call.Target())
	}
	switch fn := call.FunctionName(); fn {
	case operators.Index:
		b, ok := arg(0)
		if !ok {
			return varBound{}, false
		}
		if b.input != nil {
			k := b.input.kind()
			if k == reflect.Map {
				return inputBound(b.input.then("@values"))
			} else if k == reflect.Slice {
				return inputBound(b.input.then("@items"))
			}
		}
		return varBound{size: b.elem, elem: b.elem, deep: b.elemDeep}, true
	case operators.OptIndex:
		b, ok := arg(0)
		if !ok {
			return varBound{}, false
		}
		return varBound{size: b.elem, elem: b.elem}, true
	case operators.OptSelect:
		b, ok := arg(0)
		if !ok {
			return varBound{}, false
		}
		if b.input != nil {
			if name, isName := literalString(args[1]); isName && b.input.kind() == reflect.Struct {
				return inputBound(b.input.then(name))
			}
		}
		return varBound{size: b.elem, elem: b.elem}, true
	case "value":
		return target()
	case "optional.none":
		return varBound{deep: 1}, len(args) == 0 // holds nothing: one node
	case "optional.of", "optional.ofNonZeroValue":
		// The bound of what the optional holds, as value() returns it; deepOf adds the
		// optional's own node (optionalLayers).
		if len(args) == 1 {
			return arg(0)
		}
	case "first", "last":
		// An optional of the list's first or last element, bounded as an index of it.
		b, ok := target()
		if !ok || len(args) != 0 {
			return varBound{}, false
		}
		if b.input != nil && b.input.kind() == reflect.Slice {
			return inputBound(b.input.then("@items"))
		}
		return varBound{size: b.elem, elem: b.elem, deep: b.elemDeep}, true
	case "orValue":
		b, ok1 := target()
		d, ok2 := arg(0)
		return eitherBound(b, d), ok1 && ok2
	case operators.Conditional:
		x, ok1 := arg(1)
		y, ok2 := arg(2)
		return eitherBound(x, y), ok1 && ok2
	case operators.Add:
		x, ok1 := arg(0)
		y, ok2 := arg(1)
		b := varBound{size: addSaturating(x.size, y.size), elem: max(x.elem, y.elem)}
		if x.deep > 0 && y.deep > 0 && elemsKnown(x) && elemsKnown(y) { // two lists: one root
			b.deep, b.elemDeep = addSaturating(x.deep, y.deep)-1, max(x.elemDeep, y.elemDeep)
		}
		return b, ok1 && ok2
	case "dyn":
		if len(args) == 1 {
			b, ok := arg(0)
			return withOptionalLayers(b, env.a.GetType(args[0].ID())), ok
		}
	case "string", "bytes":
		if len(args) == 1 {
			if n, ok := stringSizes[env.a.GetType(args[0].ID()).TypeName()]; ok {
				return varBound{size: n}, true
			}
			if k := env.a.GetType(args[0].ID()).Kind(); k == types.StringKind || k == types.BytesKind {
				b, ok := arg(0)
				if fn == "bytes" {
					b.size = saturatingMul(b.size, 4) // a character is up to 4 bytes
				}
				return varBound{size: b.size}, ok
			}
		}
	case "getScheme", "getHost", "getHostname", "getPort": // parts of a URL's text
		b, ok := target()
		return varBound{size: b.size}, ok && call.IsMemberFunction()
	case "getEscapedPath": // up to three characters a character
		b, ok := target()
		return varBound{size: saturatingMul(3, b.size)}, ok && call.IsMemberFunction()
	case "getQuery": // a parameter takes a character and a separator; a value list at most all
		b, ok := target()
		return varBound{size: (b.size + 1) / 2, elem: b.size}, ok && call.IsMemberFunction()
	case "lists.range":
		if n, ok := literalRange(e); ok {
			return varBound{size: n}, true
		}
	case "lowerAscii", "upperAscii", "trim", "substring", "charAt", "reverse", "sort", "distinct", "slice":
		b, ok := target()
		b.input = nil
		return b, ok
	case "replace":
		b, ok := target()
		if !ok || len(args) < 2 {
			return varBound{}, false
		}
		r, ok := arg(1)
		return varBound{size: saturatingMul(b.size+1, r.size+1)}, ok
	case "format":
		return formatBound(env, call)
	case "strings.quote":
		if len(args) == 1 {
			b, ok := arg(0)
			return varBound{size: addSaturating(saturatingMul(b.size, 4), 2)}, ok
		}
	case "find":
		b, ok := target()
		return varBound{size: b.size}, ok
	case "findAll":
		b, ok := target()
		return varBound{size: b.size + 1, elem: b.size}, ok
	case "flatten":
		b, ok := target()
		levels, okLevels := flattenLevels(env, call)
		size := max(b.size, 1)
		for range levels {
			size = saturatingMul(size, max(b.elem, 1))
		}
		return varBound{size: size, elem: b.elem}, ok && okLevels
	case "split":
		// At most partsBound parts — a literal limit n caps them at n: before, the parts of
		// split(',', 64) of an annotation were sized at 262,145 and a comprehension over them
		// refused —, each at most the receiver's length.
		b, ok := target()
		limit := int64(-1)
		if len(args) == 2 {
			limit = literalIntOf(args[1])
		}
		return varBound{size: partsBound(b.size, limit), elem: b.size, chars: b.size}, ok
	case "join":
		b, ok := target()
		sep := varBound{}
		if len(args) == 1 {
			var okSep bool
			if sep, okSep = arg(0); !okSep {
				return varBound{}, false
			}
		}
		return varBound{size: saturatingMul(b.size, addSaturating(b.elem, sep.size))}, ok
	}
	return varBound{}, false
}

// flattenLevels is how many levels list.flatten([depth]) multiplies the size by: each level
// flattened replaces an entry by at most elem entries (elem bounds every nested list), so the
// result has at most size × elem^levels entries. It is the depth (1 without one; false unless
// a literal int), at most the levels of lists the target's type nests (a deeper depth
// flattens nothing more) unless a dyn type hides them; at most 64, past which a product of
// factors of 2 or more saturates anyway.
func flattenLevels(env boundEnv, call ast.CallExpr) (int, bool) {
	depth := int64(1)
	if args := call.Args(); len(args) == 1 {
		if args[0].Kind() != ast.LiteralKind {
			return 0, false
		}
		n, ok := args[0].AsLiteral().(types.Int)
		if !ok {
			return 0, false
		}
		depth = int64(n)
	}
	depth = min(max(depth, 0), 64)
	levels := int64(0)
	for t := env.a.GetType(call.Target().ID()); levels < depth; levels++ {
		if t.Kind() != types.ListKind {
			return int(depth), true // dyn: the levels below are unknown
		}
		t = t.Parameters()[0]
		if t.Kind() != types.ListKind && t.Kind() != types.DynKind {
			return int(levels), true // the entries are no lists: nothing (deeper) to flatten
		}
	}
	return int(levels), true
}

// formatBound bounds s.format([args…]) for a list literal of arguments: the format string
// plus each argument formatted (formattedBound); false for any other argument list.
func formatBound(env boundEnv, call ast.CallExpr) (varBound, bool) {
	if !call.IsMemberFunction() || len(call.Args()) != 1 || call.Args()[0].Kind() != ast.ListKind {
		return varBound{}, false
	}
	t, ok := deriveBound(env, call.Target())
	if !ok {
		return varBound{}, false
	}
	size, perChar := t.size, hexFactor(call.Target())
	for _, el := range call.Args()[0].AsList().Elements() {
		n, ok := formattedBound(env, el)
		if !ok {
			return varBound{}, false
		}
		size = addSaturating(size, saturatingMul(perChar, n))
	}
	return varBound{size: size}, true
}

// formattedBound bounds the characters el formats to: a string its length (bytes twice, as
// hex), a flat list or map its entries quoted, with brackets and separators, any other value
// maxFormattedDouble (a double at the largest precision; an int in binary is 64); false for a
// collection of collections, which the two-level bound cannot size.
func formattedBound(env boundEnv, el ast.Expr) (uint64, bool) {
	b, ok := deriveBound(env, el)
	t := env.a.GetType(el.ID())
	if !ok || t == nil {
		return 0, false
	}
	switch t.Kind() {
	case types.StringKind:
		return b.size, true
	case types.BytesKind:
		return saturatingMul(b.size, 2), true
	case types.ListKind, types.MapKind:
		for _, p := range t.Parameters() {
			if k := p.Kind(); k == types.ListKind || k == types.MapKind || k == types.DynKind || k == types.StructKind {
				return 0, false
			}
		}
		// Each key and value quoted as %q (up to 4 characters a byte, `\xff`), ": " and ", ".
		per := addSaturating(saturatingMul(addSaturating(saturatingMul(max(b.elem, maxFormattedDouble), 4), 3), 2), 4)
		return addSaturating(2, saturatingMul(b.size, per)), true
	case types.DynKind, types.StructKind:
		return 0, false
	}
	return maxFormattedDouble, true
}

func (p *typedPath) kind() reflect.Kind {
	t, _, _, ok := walkInput(p.typ, p.steps)
	if !ok {
		return reflect.Invalid
	}
	return t.Kind()
}

// comprehensionBound bounds a comprehension whose step only keeps or extends its accumulator
// (map, filter, and their conditional forms): the initial value plus, per element of the
// range, the most one step adds. A comprehension of an unsized result (all, exists) was
// bounded by its type already.
func comprehensionBound(env boundEnv, e ast.Expr) (varBound, bool) {
	c := e.AsComprehension()
	r, ok := deriveBound(env, c.IterRange())
	if !ok {
		return varBound{}, false
	}
	inner, _, _ := comprehensionScope(env, c, r, true)
	acc := accumulatorBound(env, inner, c, r, true)
	if acc.unbounded {
		return varBound{}, false
	}
	return deriveBound(inner.with(c.AccuVar(), acc), c.Result())
}

// accumulatorBound bounds c's accumulator through its loop and in its result, in env (around
// c) and inner (env with c's iteration variables, comprehensionScope), r being its range's
// bound (rangeOK: derived): a binding comprehension's (optMap(), optFlatMap(): an empty range)
// is its initial value's; another's the initial value plus, per element of the range, the
// most one step adds; unbounded when either cannot be derived. The bound analysis, the
// estimator's scope and the deep walk all size an accumulator here: the deep walk read one as
// an empty value, so x + x … over optMap(x, …) of 5,000 elements was admitted and charged
// 109,545 against the per-call limit (issue #15, tester atk16 finding 2).
func accumulatorBound(env, inner boundEnv, c ast.ComprehensionExpr, r varBound, rangeOK bool) varBound {
	init, ok := deriveBound(env, c.AccuInit())
	if !ok {
		return varBound{unbounded: true}
	}
	if bindsAccumulator(c) {
		return init
	}
	grow, ok := stepGrowth(inner, c.AccuVar(), c.LoopStep())
	if !ok || !rangeOK {
		return varBound{unbounded: true}
	}
	acc := varBound{size: addSaturating(init.size, saturatingMul(r.size, grow.size)), elem: max(init.elem, grow.elem)}
	if grow.deep > 0 && init.deep > 0 && elemsKnown(init) && elemsKnown(grow) {
		// grow.deep is one more than the nodes a step adds (stepGrowth).
		acc.deep = addSaturating(init.deep, saturatingMul(r.size, grow.deep-1))
		acc.elemDeep = max(init.elemDeep, grow.elemDeep)
	}
	return acc
}

// comprehensionScope is env with c's iteration variables bound to the elements (keys, values)
// of its range, whose bound is r, and the range's size; false when the range cannot be
// bounded (ok false; its variables are then unbounded too).
func comprehensionScope(env boundEnv, c ast.ComprehensionExpr, r varBound, ok bool) (boundEnv, uint64, bool) {
	if !ok {
		inner := env.with(c.IterVar(), varBound{unbounded: true})
		if c.HasIterVar2() {
			inner = inner.with(c.IterVar2(), varBound{unbounded: true})
		}
		return inner, 0, false
	}
	key, value := varBound{size: r.elem, elem: r.elem}, varBound{size: r.elem, elem: r.elem, deep: r.elemDeep}
	if r.input != nil {
		switch r.input.kind() {
		case reflect.Map:
			key, _ = inputBound(r.input.then("@keys"))
			value, _ = inputBound(r.input.then("@values"))
		case reflect.Slice:
			value, _ = inputBound(r.input.then("@items"))
		}
	}
	inner := env
	rangeType := env.a.GetType(c.IterRange().ID())
	if c.HasIterVar2() {
		if rangeType != nil && rangeType.Kind() == types.ListKind {
			key = varBound{}
		}
		inner = inner.with(c.IterVar(), key).with(c.IterVar2(), value)
	} else if rangeType != nil && rangeType.Kind() == types.ListKind {
		inner = inner.with(c.IterVar(), value)
	} else {
		inner = inner.with(c.IterVar(), key)
	}
	return inner, r.size, true
}

// stepGrowth bounds what one loop step adds to the accumulator accu: nothing when it is
// accu, the right operand when it is accu + x, the larger branch of a conditional. Its deep
// is one more than the nodes it adds (0: unknown), its elemDeep the deep size of each.
func stepGrowth(env boundEnv, accu string, step ast.Expr) (varBound, bool) {
	switch step.Kind() {
	case ast.IdentKind:
		if step.AsIdent() == accu {
			return varBound{deep: 1}, true
		}
	case ast.CallKind:
		call := step.AsCall()
		switch call.FunctionName() {
		case operators.Conditional:
			x, ok1 := stepGrowth(env, accu, call.Args()[1])
			y, ok2 := stepGrowth(env, accu, call.Args()[2])
			return eitherBound(x, y), ok1 && ok2
		case operators.Add:
			x, ok1 := stepGrowth(env, accu, call.Args()[0])
			y, ok2 := deriveBound(env, call.Args()[1])
			b := varBound{size: addSaturating(x.size, y.size), elem: max(x.elem, y.elem)}
			if x.deep > 0 && y.deep > 0 && elemsKnown(x) && elemsKnown(y) {
				b.deep, b.elemDeep = addSaturating(x.deep, y.deep)-1, max(x.elemDeep, y.elemDeep)
			}
			return b, ok1 && ok2
		case "cel.@mapInsert":
			return mapInsertGrowth(env, accu, call.Args())
		}
	}
	return varBound{}, false
}

// mapInsertGrowth bounds what a step of transformMap (cel.@mapInsert(accu, key, value)) or
// transformMapEntry (cel.@mapInsert(accu, entries)) adds: one entry of the key and value, or
// the entries of the map the step builds (cel-go ext/comprehensions.go). Without it, neither
// result had a derived bound, and a new variable holding one is refused.
func mapInsertGrowth(env boundEnv, accu string, args []ast.Expr) (varBound, bool) {
	if len(args) < 2 || args[0].Kind() != ast.IdentKind || args[0].AsIdent() != accu {
		return varBound{}, false
	}
	if len(args) == 2 {
		m, ok := boundOrScalar(env, args[1])
		return varBound{size: m.size, elem: m.elem}, ok
	}
	k, ok1 := boundOrScalar(env, args[1])
	v, ok2 := boundOrScalar(env, args[2])
	return varBound{size: 1, elem: max(k.size, k.elem, v.size, v.elem)}, ok1 && ok2
}

// boundOrScalar is e's derived bound, or an empty one when e is a scalar (it holds no
// string or entries).
func boundOrScalar(env boundEnv, e ast.Expr) (varBound, bool) {
	if scalarTyped(env.a.GetType(e.ID())) {
		return varBound{}, true
	}
	return deriveBound(env, e)
}

// variableBound is the bound of a variable's value: derived from its expression, or the
// fixed bound when the analysis cannot derive one. A variable of the fixed bound whose
// expression reads an input or variable that can exceed it is refused (the returned
// message): nothing admitted may fail at run time on inputs within their bounds.
func variableBound(a *ast.AST, vars map[string]varBound) (varBound, string) {
	env := boundEnv{a: a, vars: vars}
	if b, ok := deriveBound(env, a.Expr()); ok {
		b = withOptionalLayers(b, a.GetType(a.Expr().ID()))
		if b.deep == 0 && scalarThrough(a, a.Expr()) {
			b.deep = 1 // a scalar its dyn type hides: it nests nothing (deep_bounds.go)
		}
		return b, longStringError(a, b)
	}
	var beyond []string
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == "lists.range" {
			if _, literal := literalRange(e); !literal {
				beyond = append(beyond, "lists.range() of a computed length (as many entries as its argument)")
			}
		}
		if e.Kind() != ast.SelectKind && e.Kind() != ast.IdentKind {
			return
		}
		b, ok := deriveBound(env, e)
		if !ok || (b.size <= fixedVariableBound.size && b.elem <= fixedVariableBound.elem) {
			return
		}
		if b.input != nil && b.input.kind() == reflect.Struct {
			return // an object: what is read through it is a select of its own
		}
		if name, ok := readName(e); ok {
			beyond = append(beyond, fmt.Sprintf("%s (%s)", name, b))
		}
	}))
	beyond = append(beyond, valueBeyond(estimatorOf(a, vars), a.Expr(), true)...)
	if len(beyond) == 0 {
		return fixedVariableBound, ""
	}
	sort.Strings(beyond)
	return fixedVariableBound, fmt.Sprintf("the size of this value cannot be derived from the expression, so it "+
		"would be held to the fixed bound of %s; it reads or builds %s, which can exceed that within the declared input bounds: "+
		"read that input or build that value in the expressions that need it, or bound what the variable keeps "+
		"(substring, a literal list, map or filter over it)",
		fixedVariableBound, strings.Join(slicesCompact(beyond), ", "))
}

// underivedVariableError refuses a new variable whose bound the analysis cannot derive. Such
// a variable used to be held to the fixed bound (fixedVariableBound), checked by a walk of its
// value at run time; but a compile-time check that no value within the input bounds exceeds it
// has to follow every way a value flows, and five testers in a row found another (a nested
// list held to 317 entries, dyn() hiding a string, a field of a built map, format() of a
// computed list, the walk's own limit: issue #15, atk11–atk14), each an admitted policy that
// failed on inputs within their bounds. A new variable must have a derived bound, so that
// "compiles" implies "cannot exceed what the estimates reading it assume"; a stored one keeps
// the fixed bound and its run-time check (the update ratchet), so no installed policy breaks.
const underivedVariableError = "the size of this value cannot be derived from the expression (the results of " +
	"transformMap(), transformMapEntry(), transformList(), sortBy(), format() of a computed list, a field of a value " +
	"built here, …): a variable must have a size the cost estimates of the expressions reading it can rely on; " +
	"write the expression where it is used, or build the variable from inputs, literals, earlier variables, " +
	"map() or filter() over a bounded list, and the string functions"

// valueBeyond names what a fixed-bound variable's expression builds into its value (e and,
// where e's own bound does not derive, the subexpressions its value is made of) that the
// fixed bound may not hold: a string longer than an element may be, a collection with more
// entries or larger elements, or a string whose length the analysis cannot derive (format()
// of a computed list). Such a variable fails the run-time check on inputs within their bounds,
// or on every input (issue #15, testers atk11 findings 2 and 3, atk12 finding 1). What does
// not flow into the value is not asked: the operands of a call whose result is a scalar (a
// regex literal of matches(), a string whose size() is taken), a comprehension's condition.
// Reads of inputs and variables are variableBound's; root is the variable's own expression,
// whose bound does not derive (that is why it is fixed).
func valueBeyond(est estimator, e ast.Expr, root bool) []string {
	if _, read := readName(e); read || e.Kind() == ast.IdentKind {
		return nil // an input or variable, or an iteration variable: its range is asked
	}
	t := est.bounds.a.GetType(e.ID())
	if !root {
		if b, ok := est.derivedBound(e); ok {
			return overFixedBound(e, t, b)
		}
	}
	// The variable's own value too: a string root is held to the fixed size (1,024), and
	// '%s%s%s%s%s'.format([vm.name ×5].map(x, x)) failed on long names (issue #15, atk13).
	if stringTyped(t) {
		return []string{fmt.Sprintf("a string built by %s whose length the analysis cannot derive", builtBy(e))}
	}
	if scalarTyped(t) {
		return nil // what its operands hold is not kept
	}
	var out []string
	for _, c := range flowChildren(e) {
		out = append(out, valueBeyond(est, c, false)...)
	}
	return out
}

// builtBy names what builds the value of e, for a message.
func builtBy(e ast.Expr) string {
	switch e.Kind() {
	case ast.CallKind:
		if fn := e.AsCall().FunctionName(); !strings.HasPrefix(fn, "_") {
			return fn + "()"
		}
		return "an index or operator (" + strings.Trim(e.AsCall().FunctionName(), "_") + ")"
	case ast.SelectKind:
		return "the field " + e.AsSelect().FieldName() + " of a value built there"
	}
	return "an expression"
}

// overFixedBound names a value of bound b the fixed bound does not hold, or nothing.
func overFixedBound(e ast.Expr, t *types.Type, b varBound) []string {
	if stringTyped(t) {
		if b.size <= fixedVariableBound.elem {
			return nil
		}
		if e.Kind() == ast.LiteralKind {
			return []string{fmt.Sprintf("a literal of %d bytes (an element may hold %d)", b.size, fixedVariableBound.elem)}
		}
		return []string{fmt.Sprintf("a string of up to %d bytes (an element may hold %d)", b.size, fixedVariableBound.elem)}
	}
	if b.size <= fixedVariableBound.size && b.elem <= fixedVariableBound.elem {
		return nil
	}
	return []string{fmt.Sprintf("a collection of %s", b)}
}

// flowChildren are the subexpressions of e whose values may become part of e's value: all of
// its children but a comprehension's loop condition.
func flowChildren(e ast.Expr) []ast.Expr {
	if e.Kind() != ast.ComprehensionKind {
		return children(e)
	}
	c := e.AsComprehension()
	return []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopStep(), c.Result()}
}

func stringTyped(t *types.Type) bool {
	return t != nil && (t.Kind() == types.StringKind || t.Kind() == types.BytesKind)
}

// scalarTyped: a value of t holds no string or collection (bool, numbers, times, types, null).
func scalarTyped(t *types.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.DurationKind,
		types.TimestampKind, types.TypeKind, types.NullTypeKind:
		return true
	}
	return false
}

// longStringError refuses a bound with strings longer than maxFormattedArg, the longest
// string the estimate assumes wherever it cannot size one (an argument of format(), the
// result of trim() or replace() matched by a regex): a variable holding a longer one would be
// charged more at run time than estimated there. "" when within.
func longStringError(a *ast.AST, b varBound) string {
	longest := b.elem
	if k := a.GetType(a.Expr().ID()).Kind(); k == types.StringKind || k == types.BytesKind || k == types.DynKind {
		longest = max(longest, b.size)
	}
	if b.input != nil || longest <= maxFormattedArg {
		return ""
	}
	return fmt.Sprintf("its value can hold a string of %d characters, more than the %d the cost estimate "+
		"assumes for a string it cannot size (an argument of format(), the result of trim() or replace()): "+
		"bound it, e.g. with substring()", longest, maxFormattedArg)
}

func readName(e ast.Expr) (string, bool) {
	if p, ok := selectPath(e); ok {
		return p, true
	}
	if e.Kind() == ast.SelectKind && e.AsSelect().Operand().Kind() == ast.IdentKind &&
		e.AsSelect().Operand().AsIdent() == "variables" {
		return "variables." + e.AsSelect().FieldName(), true
	}
	return "", false
}

func slicesCompact(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// variableSizes gives the estimator the bound of each variable of the policy compiled, by
// name; one without an entry has the fixed bound.
type variableSizes map[string]varBound

// size is the estimator's size of the node at path (variables, name, steps…).
func (vs variableSizes) size(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) < 2 {
		return nil
	}
	b, ok := vs[path[1]]
	if !ok {
		b = fixedVariableBound
	}
	if b.input != nil {
		return typePathSize(b.input.typ, append(append([]string(nil), b.input.steps...), path[2:]...))
	}
	if len(path) > 2 {
		return &checker.SizeEstimate{Min: 0, Max: b.elem}
	}
	switch n.Type().Kind() {
	case types.StringKind, types.BytesKind, types.ListKind, types.MapKind,
		// a variable whose expression ends in dyn(): its bound holds whatever it is. Before, it
		// was left unsized, and `variables.b + variables.b` over b = dyn(…) cost ~1.8e18.
		types.DynKind:
		return &checker.SizeEstimate{Min: 0, Max: b.size}
	}
	return nil
}

// checkVariableSize reports a variable's value beyond its bound (varBound), and the values it
// visited to say so, which its caller charges (walkCharge). A derived bound cannot be exceeded
// by a value within the input bounds (it is derived from them), so only its top-level size is
// checked, in constant time, as a guard against a fault of the analysis: walking the elements
// is work CEL does not charge (a list doubled by lazy concatenation sixteen times holds 6.5
// million elements at a cost of 16). A fixed bound, assumed for an expression the analysis
// cannot bound, is checked in full (at most 1,024 entries, each element, key and value at most
// 317, at any depth), so that the estimate holds whatever the expression built; such a
// variable is admitted only when nothing it reads exceeds it. That walk visits at most
// allowance values (past them: errWalkUnpaid), what the policy's account can pay for: it
// visited up to 524,288 values uncharged, ~17 ms, for every such variable of every policy on
// every interface (issue #15).
func checkVariableSize(v ref.Val, b varBound, allowance uint64) (uint64, error) {
	var visited uint64
	var err error
	switch {
	case b.input != nil:
		return 0, nil // the input itself, held to its bounds when read
	case b.fixed:
		visited, err = sizeWithin(v, b.size, b.elem, allowance)
	default:
		visited, err = topSizeWithin(v, b.size, allowance)
	}
	if err != nil && !errors.Is(err, errWalkUnpaid) {
		err = fmt.Errorf("value of %s, beyond the bound the cost estimate assumes for this variable", err)
	}
	return visited, err
}

// fixedWalkEstimate is the most the run-time check of a variable of the fixed bound and type
// t may charge (checkVariableSize): a walk of the value's deep size (deepFromType over the
// fixed bound; maxSizeWalk for a type that does not say its shape, dyn), a unit per
// walkValuesPerUnit values. A flat list of strings is ~103 units, a list of lists ~10,000,
// anything deeper or dyn the whole walk, 52,429.
func fixedWalkEstimate(t *types.Type) uint64 {
	deep, ok := deepFromType(t, variableSizeBound, variableElemBound)
	if !ok || deep > maxSizeWalk {
		deep = maxSizeWalk
	}
	return walkCharge(deep)
}

// topSizeWithin checks v's own size (characters, bytes or entries) against bound, in
// constant time except for a string longer in bytes than bound (characters), whose characters
// it counts up to the bound: it returns them, for its caller to charge, as sizeWithin does.
func topSizeWithin(v ref.Val, bound, allowance uint64) (uint64, error) {
	switch x := v.(type) {
	case types.String:
		if uint64(len(x)) <= bound {
			return 0, nil
		}
		visited, err := sizeWithin(v, bound, 0, addSaturating(allowance, 1))
		return visited - 1, err // the string's own visit is the constant part
	case types.Bytes:
		if uint64(len(x)) > bound {
			return 0, fmt.Errorf("%d bytes, at most %d", len(x), bound)
		}
	case traits.Sizer:
		if n, ok := v.(traits.Sizer).Size().(types.Int); ok && uint64(n) > bound {
			return 0, fmt.Errorf("%d entries, at most %d", n, bound)
		}
	}
	return 0, nil
}

// withOptionalLayers is the bound b of a value of type t as a use that no longer sees t's
// optionals holds it (a variable, declared dyn; dyn()): the optionals become nodes of its deep
// size, and a Semver or URL they wrap is no longer bare (deep_bounds.go charges a bare one as
// one node). Before, `variables.o == variables.o` over optional.of(semver(…)) was estimated
// at one node and walked 120,000 at run time (issue #15, atk9). A deep size not derived stays
// so: the use's type (dyn) then derives none, and the operation is refused.
func withOptionalLayers(b varBound, t *types.Type) varBound {
	n := optionalLayers(t)
	if n == 0 {
		return b
	}
	b.parts = false
	if b.deep > 0 {
		b.deep = addSaturating(b.deep, n)
	}
	return b
}

// partsDeep bounds the deep size of a library value of type t parsed from at most size
// characters, as deep.go's deepSize counts it: a Semver itself, its 5 exported fields and
// 4 parts per pre-release or build identifier (at most (size+1)/2 of them, 2 per character
// bounds both); a URL itself and its 11 exported fields (k8s.io/apiserver pkg/cel, Go's
// net/url.URL); any other library value one node.
func partsDeep(t *types.Type, size uint64) uint64 {
	switch t.TypeName() {
	case "kubernetes.Semver":
		return addSaturating(6, saturatingMul(2, addSaturating(size, 1)))
	case "kubernetes.URL":
		return 12
	}
	return 1
}
