package evaluator

import (
	"math"
	"strings"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
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
