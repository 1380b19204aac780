package evaluator

import (
	"math"
	"strings"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"k8s.io/apiserver/pkg/cel/library"
)

// Calls whose Kubernetes library estimate (library.CostEstimator.EstimateCallCost) is a
// different formula from what the same library charges at run time (CallCost), here
// estimated with the run-time formula: the per-call limit is checked against the estimate,
// so a call charged more than estimated lets an admitted expression exceed the limit.

// validateEstimate estimates f.validate(s): the library charges ⌈(1 + len(s)) × 0.1⌉ ×
// ⌈f.MaxRegexSize × 0.25⌉ at run time (cost.go, CallCost "validate"), each format's own
// regex size, but estimates every format at cel.MaxNameFormatRegexSize (128) and without the
// one: format.uri() (MaxRegexSize 1,103) validating a 253-character name was estimated at 835
// and charged 7,179. f is sized by its name when written format.<name>() or
// format.named('<name>').value(), else as the format of the largest regex.
func (e estimator) validateEstimate(target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || len(args) != 1 {
		return nil
	}
	regexSize := formatRegexSize((*target).Expr())
	n := e.argBound(args[0])
	str := uint64(math.Ceil(float64(addSaturating(n, 1)) * common.StringTraversalCostFactor))
	cost := saturatingMul(str, uint64(math.Ceil(float64(regexSize)*common.RegexStringLengthCostFactor)))
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}}
}

// formatRegexSize is the MaxRegexSize the library charges validate() of the format f by:
// the named format's when f names one (format.<name>() or format.named('<name>').value()),
// else the largest of library.ConstantFormats.
func formatRegexSize(f ast.Expr) int {
	if name, ok := formatName(f); ok {
		if format, ok := library.ConstantFormats[name]; ok {
			return format.MaxRegexSize
		}
	}
	largest := 0
	for _, format := range library.ConstantFormats {
		largest = max(largest, format.MaxRegexSize)
	}
	return largest
}

// formatName is the name of the constant format f evaluates to, when f says it.
func formatName(f ast.Expr) (string, bool) {
	if f == nil || f.Kind() != ast.CallKind {
		return "", false
	}
	call := f.AsCall()
	switch {
	case !call.IsMemberFunction() && len(call.Args()) == 0:
		return strings.CutPrefix(call.FunctionName(), "format.")
	case call.IsMemberFunction() && call.FunctionName() == "value" && len(call.Args()) == 0:
		named := call.Target()
		if named.Kind() != ast.CallKind || named.AsCall().FunctionName() != "format.named" || len(named.AsCall().Args()) != 1 {
			return "", false
		}
		return literalString(named.AsCall().Args()[0])
	}
	return "", false
}

// listTraversalFunctions are the Kubernetes lists library's functions the library charges
// one traversal of their receiver at run time (cost.go, CallCost: traversalCost of
// args[0], every string of it at any depth a tenth of a unit a character, every other
// value one).
var listTraversalFunctions = map[string]bool{
	"isSorted": true, "sum": true, "max": true, "min": true,
	"indexOf": true, "lastIndexOf": true, "includes": true,
}

// listTraversalEstimate estimates one of listTraversalFunctions on a receiver whose
// elements' shape the library's estimate does not know: a list of dyn, or a dyn receiver. The library estimates one unit per element unless they are typed
// strings, and a dyn receiver, dispatched at run time (no overload's tracker, ours or
// deep.go's, applies), by the list's size alone; but it charges the traversal of whatever
// the elements hold: holders.vms.map(x, dyn(x)).max() was estimated at 3,853 and charged
// 9,987, [dyn(vm.annotations['a'])].indexOf('x') 18 and 26,228. The traversal is at most one
// unit or one traversal of the longest string per node of the receiver's deep size. nil when
// the library's estimate holds (typed elements: scalars, strings and bytes it sizes, lists and
// maps deep.go charges and deepCharges estimates; a string receiver is stringCallEstimate's);
// unbounded when the receiver's bounds cannot be derived.
func (e estimator) listTraversalEstimate(target *checker.AstNode) *checker.CallEstimate {
	if target == nil || (*target).Expr() == nil {
		return nil
	}
	t := (*target).Type()
	switch {
	case t == nil:
		return nil
	case unknownShape(t):
	case t.Kind() == types.ListKind && len(t.Parameters()) == 1:
		if k := t.Parameters()[0].Kind(); k == types.StringKind || k == types.BytesKind {
			return e.stringListTraversal(target)
		}
		if !unknownShape(t.Parameters()[0]) {
			return nil // typed: scalars the library sizes, lists and maps deep.go charges
		}
	default:
		return nil
	}
	unbounded := &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: math.MaxUint64}}
	if e.bounds == nil {
		return unbounded
	}
	x := (*target).Expr()
	env := e.scopeOf(x)
	b, ok := deriveBound(env, x)
	if !ok {
		return unbounded
	}
	nodes, ok := deepOf(env, x, b)
	if !ok && !stringsOnly(e.bounds.a, x) {
		return unbounded
	}
	if !ok {
		nodes = 1 // dyn(s) of a string s: its one traversal
	}
	chars := b.elem // each string at any depth of a list
	if unknownShape(t) {
		chars = max(chars, b.size) // the receiver may be a string itself
	}
	perNode := 1 + traversal(chars) // a comparison and the string's traversal (listTraversalCost)
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: saturatingMul(nodes, perNode)}}
}

// stringListTraversal estimates one of listTraversalFunctions on a list of strings (or
// bytes) by the bounds the receiver derives: per element one comparison plus the traversal of
// the longest element — the library's own formula, which sizes the elements of a literal
// (['a', 'b'].max(), ['corp', interface.name].includes('corp')) or of a comprehension's
// result (vm.labels.map(k, k).includes('corp')) as unbounded and refused them at ~3.7e18
// (issue #15, atk10 finding 2). nil when no bound derives: the library's estimate stands.
func (e estimator) stringListTraversal(target *checker.AstNode) *checker.CallEstimate {
	if e.bounds == nil {
		return nil
	}
	x := (*target).Expr()
	b, ok := deriveBound(e.scopeOf(x), x)
	if !ok {
		return nil
	}
	perElement := 1 + uint64(math.Ceil(float64(b.elem)*common.StringTraversalCostFactor))
	cost := saturatingMul(b.size, perElement)
	if b.chars > 0 {
		// Σ (1 + ⌈len/10⌉) over the elements is at most 2 a element plus a tenth of their
		// characters together: the 32 parts of split(',', 32) of an annotation value were
		// each sized as the whole value, and includes() on them refused at 891,381 where the
		// same search written with exists() was admitted at 53,524 (issue #15, tester atk17).
		cost = min(cost, addSaturating(saturatingMul(b.size, 2), traversal(b.chars)))
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}}
}

// stringsOnly: every value x may be, looking through dyn() and conditionals (seeThrough), is
// typed a string or bytes in a.
func stringsOnly(a *ast.AST, x ast.Expr) bool {
	for _, alt := range seeThrough(x) {
		if t := a.GetType(alt.ID()); t == nil || (t.Kind() != types.StringKind && t.Kind() != types.BytesKind) {
			return false
		}
	}
	return true
}
