package evaluator

import (
	"math"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// LanguageVersion is the Kubernetes CEL environment version policies compile against. It is
// pinned, not taken from k8s.io/apiserver's default (which resolves to one minor below the
// library outside kube-apiserver), so that upgrading the library never changes what a stored
// policy means. Raising it makes the libraries of the new version available to new and edited
// expressions only; unchanged stored expressions keep compiling (StoredExpressions).
var LanguageVersion = version.MajorMinor(1, 37)

// maxNestingDepth bounds how deeply an expression may nest (brackets, calls, operands,
// ternaries: cel-go's parser recursion). cel-go's checker formats the whole type of an
// expression on every type lookup, so checking grows with the cube of the nesting: a
// 486-character `[[[…1…]]] != []` of depth 240 took 8.6 s to compile (the webhook has 5 s;
// the controller recompiles every policy on each start), depth 120 0.36 s. Real policies
// nest a few levels; every built-in policy and sample fits well within 32
// (BenchmarkDeepestAdmittedNesting reports the compile time at this depth).
const maxNestingDepth = 32

// inputVariables maps each CEL variable to the Go type that declares it.
var inputVariables = map[string]reflect.Type{
	"vm":              reflect.TypeFor[VM](),
	"interface":       reflect.TypeFor[Interface](),
	"network":         reflect.TypeFor[Network](),
	"ipAddress":       reflect.TypeFor[IPAddress](),
	"holders":         reflect.TypeFor[Holders](),
	"namespaceObject": reflect.TypeFor[Namespace](),
	"change":          reflect.TypeFor[Change](),
}

// newInputEnvSet extends the Kubernetes base environment (ip, cidr, lists, regex, strings,
// sets, format, quantity, optionals, …) with the typed inputs. Extend is expensive, so this
// runs once per Compiler.
func newInputEnvSet(limits Limits) (*environment.EnvSet, error) {
	var nativeTypes []any
	opts := []cel.EnvOption{cel.ParserRecursionLimit(maxNestingDepth)}
	for name, t := range inputVariables {
		nativeTypes = append(nativeTypes, t)
		opts = append(opts, cel.Variable(name, cel.ObjectType(celTypeName(t))))
	}
	nativeTypes = append(nativeTypes, ext.ParseStructTag("json"))
	opts = append([]cel.EnvOption{ext.NativeTypes(nativeTypes...), orderedMaps}, opts...)
	guarded, err := guardedOverloads(limits)
	if err != nil {
		return nil, err
	}
	opts = append(opts, guarded...)
	deep, err := deepOverloads(limits)
	if err != nil {
		return nil, err
	}
	opts = append(opts, deep...)

	return environment.MustBaseEnvSet(LanguageVersion).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        opts,
		ProgramOptions: []cel.ProgramOption{
			cel.CostLimit(limits.PerCallCostLimit),
			cel.InterruptCheckFrequency(limits.CheckFrequency),
			formatCostTracker,
			parseCostTrackers,
			regexCostTrackers,
			rangeCostTracker,
			stringCostTrackers,
			quantityCostTrackers(),
			linearCostTracking,
			deepCostTrackers(limits),
			deepOperatorDecorator(limits),
		},
	})
}

// celTypeName is the name cel-go's native type provider gives a Go struct type.
func celTypeName(t reflect.Type) string { return "evaluator." + t.Name() }

// sizeEstimator gives the static cost estimator the declared bounds of the inputs (the
// maxSize tags of input.go) by walking an expression's path through the Go types.
type sizeEstimator struct {
	// vars are the bounds of the variables of the policy compiled (fixed when nil).
	vars variableSizes
}

var _ checker.CostEstimator = sizeEstimator{}

// EstimateSize implements checker.CostEstimator from the maxSize tags of input.go.
func (s sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	switch path[0] {
	case "variables":
		return s.vars.size(n)
	case "allocation": // "Auto", "Static" or "None"
		return &checker.SizeEstimate{Min: 0, Max: 8}
	}
	t, ok := inputVariables[path[0]]
	if !ok {
		return nil
	}
	return typePathSize(t, path[1:])
}

// variableSizeBound is the size a policy variable's value is assumed to have at most when
// its bound cannot be derived from its expression (variableBound): characters of a string,
// entries of a list or map. Decide enforces it, and variableElemBound (checkVariableSize);
// such a variable is admitted only when nothing it reads can exceed them.
const variableSizeBound = 1024

// variableElemBound is the size each element, key or value of such a variable's value (at any
// depth) is assumed to have at most: a qualified name, so that a list of label keys fits.
const variableElemBound = defaultKeySize

// EstimateCallCost implements checker.CostEstimator; calls are left to the library.
func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// estimator is the static cost estimator: the Kubernetes library's function costs over our
// declared input sizes, plus result sizes for string() of fixed-size values. cel-go leaves
// those unbounded, which would reject `'nic ' + string(interface.index)` as infinitely
// expensive; the library does not ask its SizeEstimator about calls, hence this wrapper.
type estimator struct {
	lib *library.CostEstimator
	// bounds, when set, derives the bound of any subexpression of the expression estimated
	// (deriveBound): format() and join() size the elements of a literal list by it.
	bounds *boundEnv
	// parents maps each subexpression's ID to the expression holding it (with bounds).
	parents map[int64]ast.Expr
	// longest caches longestString (with bounds).
	longest *stringCeiling
	// wide: the expression holds a string literal of characters beyond ASCII, which cel-go's
	// checker sizes in code points (checker/cost.go computeExprSize), fewer than its bytes.
	wide bool
}

// computedBytes bounds the bytes of the string a, which our charges count (len), from the
// size cel-go's checker computed for it; false when it computed none. The checker counts a
// literal's code points and our input bounds bytes: in an expression whose literals are
// ASCII the two agree, otherwise a's derived bound (bytes) stands, else four bytes a code
// point (utf8.UTFMax). Before, ('<2,000 four-byte characters>' + vm.name).indexOf('x') was
// estimated at 681 and charged 1,881.
func (e estimator) computedBytes(a checker.AstNode) (uint64, bool) {
	cs := a.ComputedSize()
	if cs == nil || cs.Max == math.MaxUint64 {
		return 0, false
	}
	if !e.wide {
		return cs.Max, true
	}
	if b, ok := e.derivedBound(a.Expr()); ok {
		return b.size, true
	}
	return saturatingMul(cs.Max, utf8.UTFMax), true
}

// hasWideLiteral reports whether e holds a string literal longer in bytes than in code points.
func hasWideLiteral(e ast.Expr) bool {
	wide := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if s, ok := literalString(x); ok && utf8.RuneCountInString(s) != len(s) {
			wide = true
		}
	}))
	return wide
}

// stringCeiling is longestString, computed once per expression estimated.
type stringCeiling struct {
	done bool
	n    uint64
}

var _ checker.CostEstimator = estimator{}

// EstimateSize implements checker.CostEstimator. An iteration variable over a range no input
// path reaches (the parts of split(), a list a comprehension built) is sized by its derived
// bound (scopedBound), as the same range held in a variable is: before,
// interface.name.split('-').exists(p, p.upperAscii() == 'DMZ') was refused as unbounded,
// and admitted with the split in a variable. A call the checker leaves unsized is sized by
// its derived bound too (callSize).
func (e estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if size := e.identSize(n); size != nil {
		return size
	}
	return e.callSize(n)
}

// identSize is the library's size of n, else n's derived bound when it is an iteration
// variable; nil otherwise.
func (e estimator) identSize(n checker.AstNode) *checker.SizeEstimate {
	if size := e.lib.EstimateSize(n); size != nil {
		return size
	}
	return sizeOf(n, ast.IdentKind, e.scopedBound)
}

// callSize is the derived bound of n when it is a call of a sized result that neither the
// checker nor the library sized (cel-go asks the estimator only then): an index or
// orValue() of a map of maps, a library call of a computed list. Unsized, comparing two was
// estimated at ~1.8e19 and refused: vm.labels.exists(l, variables.v[?interface.name].
// orValue({}) == variables.v[?l].orValue({})) over a variable of two small maps (issue #15,
// tester atk15). The deep walk charges what comparing them walks.
func (e estimator) callSize(n checker.AstNode) *checker.SizeEstimate {
	return sizeOf(n, ast.CallKind, e.derivedBound)
}

// sizeOf is the size bound gives n when n is an expression of kind k whose value has a size
// (sizedKind); nil otherwise or when bound has none.
func sizeOf(n checker.AstNode, k ast.ExprKind, bound func(ast.Expr) (varBound, bool)) *checker.SizeEstimate {
	x := n.Expr()
	if x == nil || x.Kind() != k || n.Type() == nil || !sizedKind(n.Type().Kind()) {
		return nil
	}
	b, ok := bound(x)
	if !ok {
		return nil
	}
	return &checker.SizeEstimate{Min: 0, Max: b.size}
}

// sizedKind: a value of kind k has a size the estimate counts (characters, bytes, entries).
func sizedKind(k types.Kind) bool {
	switch k {
	case types.StringKind, types.BytesKind, types.ListKind, types.MapKind:
		return true
	}
	return false
}

// scopedBound is the bound of the identifier x when a comprehension around it binds its name:
// an iteration variable (the elements, keys or values of its range) or, in a comprehension's
// result, its accumulator (accumulatorBound: an optMap() name is the value it names), the
// innermost binding first, as scopeOf builds them; false when none binds it or its bound
// cannot be derived (unbounded), which is not a bound of 0. It walked the comprehensions
// itself, past the result of an optMap() to an outer loop variable of the same name:
// ['a'].exists(x, optional.of(vm.annotations['a']).optMap(x, x.indexOf('b') + …)) sized the
// annotation as 'a', was estimated at 70 and charged 262,179 (issue #15, tester atk19).
func (e estimator) scopedBound(x ast.Expr) (varBound, bool) {
	if e.bounds == nil {
		return varBound{}, false
	}
	b, ok := e.scopeOf(x).scope[x.AsIdent()]
	if !ok || b.unbounded {
		return varBound{}, false
	}
	return b, true
}

// constantCall is the estimate of a call that takes constant time.
var constantCall = &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1},
	ResultSize: &checker.SizeEstimate{Min: 1, Max: 1}}

// EstimateCallCost implements checker.CostEstimator. Besides string(), it knows what the
// library leaves unbounded though it is not: type() is constant time and so is comparing
// two types; a search in a literal list costs one comparison per element, each as long as
// the longest literal.
func (e estimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if est := e.stringCallEstimate(overloadID, target, args); est != nil {
		return est
	}
	if est := e.parseEstimate(overloadID, args); est != nil {
		return est
	}
	if est := e.parsedValueEstimate(function, overloadID, target, args); est != nil {
		return est
	}
	switch function {
	case overloads.TypeConvertType:
		return constantCall
	case overloads.Equals, overloads.NotEquals:
		if len(args) == 2 && (args[0].Type().Kind() == types.TypeKind || args[1].Type().Kind() == types.TypeKind) {
			return constantCall
		}
	case "join":
		if est := e.joinEstimate(target, args); est != nil {
			return est
		}
		return doubledJoinEstimate(e.lib.EstimateCallCost(function, overloadID, target, args))
	case "orValue":
		if est := orValueEstimate(target, args); est != nil {
			return est
		}
	case "matches", "find", "findAll":
		if est := e.regexEstimate(function, target, args); est != nil {
			return est
		}
	case "format":
		if overloadID == "string_format" {
			return e.formatEstimate(target, args)
		}
	case "validate":
		if overloadID == "format-validate" {
			return e.validateEstimate(target, args)
		}
	case "lists.range":
		if est := rangeEstimate(args); est != nil {
			return est
		}
	case "includes", "indexOf", "lastIndexOf":
		if est := literalListSearch(target); est != nil {
			return est
		}
	}
	if listTraversalFunctions[function] && !strings.HasPrefix(overloadID, "string_") {
		if est := e.listTraversalEstimate(target); est != nil {
			return est
		}
	}
	if function == overloads.TypeConvertString && len(args) == 1 {
		size := e.identSize(args[0]) // string(s) and string(bytes) are as long as their input
		if max, ok := stringSizes[args[0].Type().TypeName()]; ok {
			size = &checker.SizeEstimate{Min: 1, Max: max}
		}
		if size != nil {
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}, ResultSize: size}
		}
	}
	return e.lib.EstimateCallCost(function, overloadID, target, args)
}

// doubledJoinEstimate is the Kubernetes library's estimate of join() with its cost doubled:
// the library estimates one traversal of the result (StringTraversalCostFactor per
// character) but charges two at run time (library.CostEstimator.CallCost), so that an
// expression joining the holders' names was admitted at 97,157 and charged 103,647 against
// the per-call limit of 100,000. Doubling the rounded-up traversal is at least the run-time
// ceil(2 × factor × size).
func doubledJoinEstimate(est *checker.CallEstimate) *checker.CallEstimate {
	if est == nil {
		return nil
	}
	doubled := *est
	doubled.CostEstimate = checker.CostEstimate{Min: est.Min, Max: saturatingMul(est.Max, 2)}
	return &doubled
}

// stringSizes bounds the length of string(x) by the type of x.
var stringSizes = map[string]uint64{
	"int": 20, "uint": 20, "double": 32, "bool": 5,
	"google.protobuf.Timestamp": 40, "google.protobuf.Duration": 32,
	"net.IP": 45, "net.CIDR": 49,
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// literalListSearch estimates a search in target when it is a list literal of constants:
// per element one comparison plus the traversal of the longest constant (the library's
// formula, with the real sizes); nil otherwise.
func literalListSearch(target *checker.AstNode) *checker.CallEstimate {
	if target == nil || (*target).Expr() == nil || (*target).Expr().Kind() != ast.ListKind {
		return nil
	}
	elems := (*target).Expr().AsList().Elements()
	longest := 0
	for _, el := range elems {
		if el.Kind() != ast.LiteralKind {
			return nil
		}
		switch v := el.AsLiteral().(type) {
		case types.String:
			longest = max(longest, len(v))
		case types.Bytes:
			longest = max(longest, len(v))
		}
	}
	perElement := 1 + uint64(math.Ceil(float64(longest)*common.StringTraversalCostFactor))
	cost := uint64(len(elems)) * perElement
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 0, Max: cost}}
}

// costEstimator is the static estimator of expressions that read no variable's derived bound.
var costEstimator = estimatorFor(nil)

// estimatorFor is the static estimator of a policy whose variables have the bounds vars.
func estimatorFor(vars variableSizes) estimator {
	return estimator{lib: &library.CostEstimator{SizeEstimator: sizeEstimator{vars: vars}}}
}

// estimatorOf is the static estimator of the checked expression a of a policy whose
// variables have the bounds vars: it derives its subexpressions' bounds as a variable's are.
func estimatorOf(a *ast.AST, vars variableSizes) estimator {
	e := estimatorFor(vars)
	e.bounds = &boundEnv{a: a, vars: vars}
	e.parents = map[int64]ast.Expr{}
	e.longest = &stringCeiling{}
	e.wide = hasWideLiteral(a.Expr())
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(p ast.Expr) {
		for _, child := range children(p) {
			e.parents[child.ID()] = p
		}
	}))
	return e
}

// derivedBound is the bound of the subexpression x of the expression estimated, with the
// iteration variables of the comprehensions around it bound to their range's elements;
// false when the estimator knows no expression or the analysis cannot bound x.
func (e estimator) derivedBound(x ast.Expr) (varBound, bool) {
	if e.bounds == nil {
		return varBound{}, false
	}
	return deriveBound(e.scopeOf(x), x)
}

// scopeOf is the bound environment at x: the expression's, plus the iteration variables of
// each comprehension whose condition or step holds x (its accumulator unbounded there). Before,
// `[variables.v + variables.v].exists(x, x.matches('b'))` sized x at 328,704 characters, was
// admitted, then stopped by the per-call limit on 524,000.
//
// The result of a comprehension sees its accumulator bound as accumulatorBound bounds it: a
// binding comprehension's (optMap(), optFlatMap()) was not in scope, so optMap(vm, vm.name…)
// sized vm.name as the input's 253 characters (issue #15, tester atk16).
func (e estimator) scopeOf(x ast.Expr) boundEnv {
	type scoped struct {
		c      ast.ComprehensionExpr
		result bool // x is in c's result, where its accumulator is in scope
	}
	var around []scoped
	for child, p := x.ID(), e.parents[x.ID()]; p != nil; child, p = p.ID(), e.parents[p.ID()] {
		if p.Kind() != ast.ComprehensionKind {
			continue
		}
		c := p.AsComprehension()
		switch child {
		case c.LoopCondition().ID(), c.LoopStep().ID():
			around = append(around, scoped{c: c})
		case c.Result().ID():
			around = append(around, scoped{c: c, result: true})
		}
	}
	env := *e.bounds
	for i := len(around) - 1; i >= 0; i-- {
		c := around[i].c
		r, ok := deriveBound(env, c.IterRange())
		inner, _, _ := comprehensionScope(env, c, r, ok)
		if around[i].result {
			env = env.with(c.AccuVar(), accumulatorBound(env, inner, c, r, ok))
			continue
		}
		// In the loop the accumulator is still being built: unbounded, and it shadows an
		// outer name alike.
		env = inner.with(c.AccuVar(), varBound{unbounded: true})
	}
	return env
}

// bindsAccumulator: c iterates over an empty list literal, so its accumulator is only a name
// for its initial value (how cel-go expands optMap(), optFlatMap() and cel.bind).
func bindsAccumulator(c ast.ComprehensionExpr) bool {
	r := c.IterRange()
	return r.Kind() == ast.ListKind && len(r.AsList().Elements()) == 0
}

// children are the direct subexpressions of e.
func children(e ast.Expr) []ast.Expr {
	switch e.Kind() {
	case ast.CallKind:
		out := e.AsCall().Args()
		if e.AsCall().IsMemberFunction() {
			out = append([]ast.Expr{e.AsCall().Target()}, out...)
		}
		return out
	case ast.SelectKind:
		return []ast.Expr{e.AsSelect().Operand()}
	case ast.ListKind:
		return e.AsList().Elements()
	case ast.MapKind:
		var out []ast.Expr
		for _, entry := range e.AsMap().Entries() {
			out = append(out, entry.AsMapEntry().Key(), entry.AsMapEntry().Value())
		}
		return out
	case ast.StructKind:
		var out []ast.Expr
		for _, f := range e.AsStruct().Fields() {
			out = append(out, f.AsStructField().Value())
		}
		return out
	case ast.ComprehensionKind:
		c := e.AsComprehension()
		return []ast.Expr{c.IterRange(), c.AccuInit(), c.LoopCondition(), c.LoopStep(), c.Result()}
	}
	return nil
}

// boundedRange: r is a literal list or map, lists.range of a literal, or a field path from
// an input or `variables`.
func boundedRange(r ast.Expr) bool {
	switch r.Kind() {
	case ast.ListKind, ast.MapKind:
		return true
	case ast.CallKind:
		_, ok := literalRange(r)
		return ok
	case ast.SelectKind:
		return boundedRange(r.AsSelect().Operand())
	case ast.IdentKind:
		_, input := inputVariables[r.AsIdent()]
		return input || r.AsIdent() == "variables"
	}
	return false
}
