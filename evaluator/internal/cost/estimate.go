package cost

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/library"
)

// The static estimate is an admission sanity check, not a promise: cel-go's and the
// Kubernetes library's estimate of an expression over the declared input bounds, with every
// value the estimate cannot size (a variable's computed elements, a call's unsized result)
// assumed UnknownSize long. An expression estimated beyond StaticLimit is refused as
// obviously unbounded (Kubernetes refuses CRD rules at ten times the per-call limit); one
// beyond PerCallLimit is admitted with a warning, since the run time will stop it on inputs
// near the bounds. The run-time limits hold whatever the estimate said.

// UnknownSize is the characters or entries the estimate assumes of a value it cannot size.
const UnknownSize = 1024

// Size is what the estimate knows of a value's size: the input path it is (vm.annotations),
// whose bounds size it and its elements, or its largest size (characters or entries), 0 when
// unknown.
type Size struct {
	max   uint64
	input []string
}

// Sizes are the sizes of a policy's variables, by name.
type Sizes map[string]Size

// Estimate is an expression's estimated worst-case cost and the size of its value.
type Estimate struct {
	// Cost is the estimated worst-case runtime cost, in cel-go's units.
	Cost uint64
	// Size is the estimated bound on the size of the expression's value.
	Size Size
}

// Estimate estimates checked (compiled in env) over the declared input bounds, its variables
// sized by vars.
func (c Config) Estimate(env *cel.Env, checked *cel.Ast, vars Sizes) (Estimate, error) {
	e := &estimator{sizer: sizer{c: c, vars: vars, binds: bindings(checked.NativeRep().Expr())}}
	e.lib = &library.CostEstimator{SizeEstimator: e.sizer}
	probed, err := withSizeProbe(checked.NativeRep())
	if err != nil {
		return Estimate{}, err
	}
	est, err := env.EstimateCost(probed, e)
	if err != nil {
		return Estimate{}, err
	}
	return Estimate{Cost: est.Max, Size: c.sizeOf(checked.NativeRep().Expr(), vars, e.probed)}, nil
}

// Refusal is why an expression estimated at cost is refused, or "".
func (c Config) Refusal(cost uint64) string {
	if cost <= c.StaticLimit {
		return ""
	}
	if cost == math.MaxUint64 {
		return "the estimate finds no bound on its cost (a range whose size grows with a value, such as " +
			"lists.range() of a computed number): bound it, e.g. with a literal"
	}
	return fmt.Sprintf("estimated worst-case cost %d exceeds %d, the most an expression may be estimated at "+
		"(the per-call limit it runs under is %d): iterate over fewer or smaller values, or nest fewer comprehensions",
		cost, c.StaticLimit, c.PerCallLimit)
}

// Warning is what an admin should know of an expression estimated at cost, or "".
func (c Config) Warning(cost uint64) string {
	if cost <= c.PerCallLimit {
		return ""
	}
	return fmt.Sprintf("estimated worst-case cost %d exceeds the per-call limit %d it runs under: on inputs near the "+
		"declared bounds (256 labels or annotations, 256 KiB annotation values) the run time stops it with a PolicyError",
		cost, c.PerCallLimit)
}

// sizeOf is the size of the value of e: the input or variable it reads whole, else what the
// estimate computed for it (probed), else unknown.
func (c Config) sizeOf(e ast.Expr, vars Sizes, probed *checker.SizeEstimate) Size {
	if path, ok := c.selectPath(e); ok {
		return Size{input: strings.Split(path, ".")}
	}
	if e.Kind() == ast.SelectKind {
		if op := e.AsSelect().Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "variables" {
			return vars[e.AsSelect().FieldName()]
		}
	}
	if probed != nil && probed.Max != math.MaxUint64 {
		return Size{max: probed.Max}
	}
	return Size{}
}

// sizeProbe is the function withSizeProbe wraps an expression in, so that the estimator is
// asked the size of its value.
const sizeProbe = "@vmipam.size"

// withSizeProbe is a, checked, wrapped in a call of sizeProbe.
func withSizeProbe(a *ast.AST) (*cel.Ast, error) {
	id := ast.MaxID(a) + 1
	call := ast.NewExprFactory().NewCall(id, sizeProbe, a.Expr())
	typeMap := maps.Clone(a.TypeMap())
	typeMap[id] = types.DynType
	refMap := maps.Clone(a.ReferenceMap())
	refMap[id] = ast.NewFunctionReference(sizeProbe)
	pb, err := ast.ToProto(ast.NewCheckedAST(ast.NewAST(call, a.SourceInfo()), typeMap, refMap))
	if err != nil {
		return nil, err
	}
	return cel.CheckedExprToAst(pb), nil
}

// estimator is the Kubernetes library's estimator over sizer, which also records the size
// of the value sizeProbe is called on.
type estimator struct {
	sizer  sizer
	lib    *library.CostEstimator
	probed *checker.SizeEstimate
}

var _ checker.CostEstimator = (*estimator)(nil)

// EstimateSize implements checker.CostEstimator.
func (e *estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	return e.lib.EstimateSize(n)
}

// EstimateCallCost implements checker.CostEstimator.
func (e *estimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if function == sizeProbe && len(args) == 1 {
		e.probed = args[0].ComputedSize()
		if e.probed == nil {
			e.probed = e.EstimateSize(args[0])
		}
		return &checker.CallEstimate{}
	}
	return e.lib.EstimateCallCost(function, overloadID, target, args)
}

// sizer sizes what the estimate reads: an input path by its tags, a variable by its Size,
// `allocation` by its longest value, a list or map by its form (collectionSize), any other
// string, bytes, list or map as UnknownSize, and anything else (a scalar, an input object, an
// IP, a Quantity) as one.
type sizer struct {
	c    Config
	vars Sizes
	// binds are the names binding comprehensions (cel.bind, optMap(), sortBy()'s input)
	// bind, to the expressions they name.
	binds map[string]ast.Expr
}

// EstimateSize implements checker.CostEstimator.
func (s sizer) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if size := s.pathSize(n.Path()); size != nil {
		return size
	}
	if x := n.Expr(); x != nil {
		if size, ok := s.collectionSize(x); ok {
			return &checker.SizeEstimate{Min: 0, Max: size}
		}
	}
	if t := n.Type(); t != nil && sizedKind(t.Kind()) {
		return &checker.SizeEstimate{Min: 0, Max: UnknownSize}
	}
	return &checker.SizeEstimate{Min: 1, Max: 1} // a scalar, an object or a library value
}

// pathSize is the size of the value at path, nil when it is not known.
func (s sizer) pathSize(path []string) *checker.SizeEstimate {
	switch {
	case len(path) == 0:
		return nil
	case path[0] == "allocation":
		return &checker.SizeEstimate{Min: 0, Max: 8} // "Auto", "Static" or "None"
	case path[0] == "variables" && len(path) > 1:
		v, ok := s.vars[path[1]]
		switch {
		case !ok:
			return nil
		case v.input != nil:
			return s.c.inputSize(append(append([]string(nil), v.input...), path[2:]...))
		case len(path) == 2 && v.max > 0:
			return &checker.SizeEstimate{Min: 0, Max: v.max}
		}
		return nil
	}
	return s.c.inputSize(path)
}

// collectionSize bounds the entries of the list or map e evaluates to from its form: a literal
// its entries, a comprehension (map(), filter(), transformMap()) its range's, a name a binding
// comprehension binds what it names, list `+` its operands' together, an input or variable
// path its size. cel-go's estimate computes none of these, and sized sortBy()'s input, a
// map() of a one-element list, as unbounded.
func (s sizer) collectionSize(e ast.Expr) (uint64, bool) {
	switch e.Kind() {
	case ast.ListKind:
		return uint64(len(e.AsList().Elements())), true
	case ast.MapKind:
		return uint64(len(e.AsMap().Entries())), true
	case ast.ComprehensionKind:
		return s.collectionSize(e.AsComprehension().IterRange())
	case ast.IdentKind:
		if bound, ok := s.binds[e.AsIdent()]; ok {
			return s.collectionSize(bound)
		}
	case ast.CallKind:
		if call := e.AsCall(); call.FunctionName() == operators.Add && len(call.Args()) == 2 {
			a, okA := s.collectionSize(call.Args()[0])
			b, okB := s.collectionSize(call.Args()[1])
			return addSaturating(a, b), okA && okB
		}
	}
	if path, ok := s.path(e); ok {
		if size := s.pathSize(path); size != nil {
			return size.Max, true
		}
	}
	return 0, false
}

// path is e as a path the estimate sizes: an input's or a variable's, with its fields.
func (s sizer) path(e ast.Expr) ([]string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return []string{e.AsIdent()}, true
	case ast.SelectKind:
		p, ok := s.path(e.AsSelect().Operand())
		return append(p, e.AsSelect().FieldName()), ok
	}
	return nil, false
}

// bindings maps the accumulator of every binding comprehension of e (one over an empty list:
// how cel.bind, optMap() and sortBy() name a value) to its initial value.
func bindings(e ast.Expr) map[string]ast.Expr {
	out := map[string]ast.Expr{}
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if x.Kind() != ast.ComprehensionKind {
			return
		}
		c := x.AsComprehension()
		if r := c.IterRange(); r.Kind() == ast.ListKind && len(r.AsList().Elements()) == 0 {
			out[c.AccuVar()] = c.AccuInit()
		}
	}))
	return out
}

// inputSize is the declared bound of the input at path; nil when it has none.
func (c Config) inputSize(path []string) *checker.SizeEstimate {
	t, bound, ok := c.walkInput(path)
	if !ok || bound == 0 {
		return nil
	}
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		return &checker.SizeEstimate{Min: 0, Max: bound}
	}
	return nil
}

// EstimateCallCost implements checker.CostEstimator: calls are the library's.
func (sizer) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// sizedKind: a value of kind k has a size the estimate counts.
func sizedKind(k types.Kind) bool {
	switch k {
	case types.StringKind, types.BytesKind, types.ListKind, types.MapKind:
		return true
	}
	return false
}
