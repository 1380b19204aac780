package evaluator

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/parser"
)

// unsizedProbeCost is the estimate of s.matches('a') at and above which s is a string of
// the largest size an input holds (matching costs about a tenth of a unit per character).
const unsizedProbeCost = 10_000

// noIterationHint is unboundedHint's for an expression without a comprehension: its calls
// cost that much on the values they get, so it names what those are — the inputs the
// expression reads, with their bounds, and the call results it calls a function on that the
// estimate sizes as the longest string an input holds (an annotation value, 256 KiB; probed,
// as rangeBlame does).
// Before, it blamed an annotation value whatever the expression read:
// vm.name.lowerAscii().matches(…) reads no annotation; and it named nothing for an expression
// reading only variables, whose sizes vars holds.
func noIterationHint(p *probes, e ast.Expr, vars variableSizes) string {
	if hint := computedRangeHint(e); hint != "" {
		return hint
	}
	reads := map[string]bool{}
	inputReads(e, reads)
	var inputs []string
	for _, f := range boundedFieldsRead(reads) {
		switch {
		case f.bound == 0:
		case reflect.TypeFor[Input]().FieldByIndex(f.index).Type.Kind() == reflect.String:
			inputs = append(inputs, fmt.Sprintf("%s (up to %d characters)", f.path, f.bound))
		default:
			inputs = append(inputs, fmt.Sprintf("%s (up to %d entries of up to %d characters)", f.path, f.bound, f.elem))
		}
	}
	inputs = append(inputs, variablesRead(e, vars)...)
	var results []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind || !e.AsCall().IsMemberFunction() {
			return
		}
		t := e.AsCall().Target()
		if t.Kind() != ast.CallKind || strings.HasPrefix(t.AsCall().FunctionName(), "_") {
			return // an input, a variable, a literal, an index or operator
		}
		src, err := parser.Unparse(t, nil)
		if err != nil || slices.Contains(results, src) {
			return
		}
		// Judged by the estimator itself: matching a one-character pattern on a string of
		// the estimate's size costs about a tenth of a unit per character (~26,000 on a
		// 256 KiB annotation value, 28 on vm.name).
		if cost, ok := p.cost("(" + src + ").matches('a')"); ok && cost >= unsizedProbeCost {
			results = append(results, src)
		}
	}))
	var parts []string
	if len(inputs) > 0 {
		parts = append(parts, "it reads "+strings.Join(inputs, ", "))
	}
	for _, r := range results {
		parts = append(parts, "the result of "+r+" is sized by the estimate as the longest string an input holds (256 KiB)")
	}
	why := ""
	if len(parts) > 0 {
		why = " (" + strings.Join(parts, "; ") + ")"
	}
	return "no iteration: its calls cost that much on values as large as their bounds allow" + why +
		": call them on smaller inputs or directly on an input, or with smaller patterns and formats"
}

// computedRangeHint names the first lists.range(n) of e whose n is not a literal: its size
// grows with the value of n, which the estimate does not bound, so it is the cause. Before,
// lists.range(holders.vms.size() > 10 ? 10 : holders.vms.size()).size() > 0 blamed the
// holders' size (issue #15, tester atk17). "" when there is none.
func computedRangeHint(e ast.Expr) string {
	hint := ""
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if hint != "" || x.Kind() != ast.CallKind || x.AsCall().FunctionName() != "lists.range" || len(x.AsCall().Args()) != 1 {
			return
		}
		if _, ok := literalRange(x); ok {
			return
		}
		arg, err := parser.Unparse(x.AsCall().Args()[0], nil)
		if err != nil {
			return
		}
		hint = fmt.Sprintf("the size of lists.range(%s) is unbounded: it grows with the value of %s; give lists.range a literal bound", cut(arg, 80), cut(arg, 80))
	}))
	return hint
}

// refusedVariablesHint is the error of an expression whose estimate fails and that reads
// variables refused already (refused: name → path of its expression), or "" when it reads
// none. A refused variable has no bound: the estimate of what reads it was the cost
// 18446744073709551615 with a hint to "iterate over … a variable", blaming the expression for
// the variable's fault.
func refusedVariablesHint(e ast.Expr, refused map[string]string) string {
	if len(refused) == 0 {
		return ""
	}
	var names []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.SelectKind {
			return
		}
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() == ast.IdentKind && op.AsIdent() == "variables" {
			if path, ok := refused[sel.FieldName()]; ok {
				names = append(names, fmt.Sprintf("variables.%s (refused at %s)", sel.FieldName(), path))
			}
		}
	}))
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return fmt.Sprintf("reads %s: its cost can be estimated once that variable compiles; fix the variable first",
		strings.Join(slices.Compact(names), ", "))
}

// variablesRead names the variables e reads with the sizes the estimate gives them (vars; the
// fixed bound for one not derived), sorted: "variables.a (up to 262144 characters or entries)".
func variablesRead(e ast.Expr, vars variableSizes) []string {
	var out []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.SelectKind {
			return
		}
		sel := e.AsSelect()
		if op := sel.Operand(); op.Kind() != ast.IdentKind || op.AsIdent() != "variables" {
			return
		}
		b, ok := vars[sel.FieldName()]
		if !ok {
			b = fixedVariableBound
		}
		size := b.size
		if b.input != nil {
			if est := typePathSize(b.input.typ, b.input.steps); est != nil {
				size = est.Max
			}
		}
		out = append(out, fmt.Sprintf("variables.%s (up to %d characters or entries)", sel.FieldName(), size))
	}))
	slices.Sort(out)
	return slices.Compact(out)
}
