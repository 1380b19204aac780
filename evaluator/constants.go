package evaluator

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/interpreter"
	"github.com/google/cel-go/parser"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
)

// constantCallError evaluates every largest call of e whose operands are all constants (no
// input, no variable, no comprehension) and, for one that fails, returns "<call>: <error>"
// naming the innermost failing call within it; "" when none fails. Such a call fails on
// every evaluation that reaches it (not every evaluation: it may sit in a branch never taken) — a conversion out of range (int(1e30), uint(-1)), bytes
// that are not UTF-8 (string(b'\xff')), a string that is not a number (int('x')) — and the
// environment folds constant calls when it plans a program, whose error then carried no
// call and the wording of a compiler fault ("Internal error").
//
// The expression itself, when constant, is planned from checked rather than compiled again;
// re-checking the parts of e costs at most what checking e did (cost.CheckWork) and a little
// (recheckFloor); beyond that allowance the failure named is an outer call.
func constantCallError(env *cel.Env, checked *cel.Ast) string {
	e := ast.NavigateAST(checked.NativeRep())
	funcs := env.Functions()
	allowance := cost.CheckWork(funcs, e) + recheckFloor
	var calls []ast.NavigableExpr
	constantCalls(e, &calls)
	for _, call := range calls {
		var err error
		if call.ID() == e.ID() {
			err = evalChecked(env, checked)
		} else {
			_, err = evalConstantWithin(env, funcs, call, &allowance)
		}
		if err != nil {
			return innermostFailure(env, funcs, call, err, &allowance)
		}
	}
	return ""
}

// recheckFloor is the checkWork constantCallError may spend on any expression, however
// small: enough to name the innermost failing call of every realistic expression.
const recheckFloor = 10_000

// evalConstantWithin is evalConstant when re-checking e fits in allowance (cost.CheckWork), which
// it then spends; evaluated is false when it does not.
func evalConstantWithin(env *cel.Env, funcs map[string]*decls.FunctionDecl, e ast.Expr, allowance *uint64) (evaluated bool, err error) {
	work := cost.CheckWork(funcs, e)
	if work > *allowance {
		return false, nil
	}
	*allowance -= work
	return true, evalConstant(env, e)
}

// innermostFailure descends from a failing constant call to the deepest call that fails,
// as far as allowance lets it re-check calls (evalConstantWithin).
func innermostFailure(env *cel.Env, funcs map[string]*decls.FunctionDecl, call ast.NavigableExpr, err error, allowance *uint64) string {
	for _, child := range call.Children() {
		if child.Kind() != ast.CallKind {
			continue
		}
		evaluated, childErr := evalConstantWithin(env, funcs, child, allowance)
		if !evaluated {
			break
		}
		if childErr != nil {
			return innermostFailure(env, funcs, child, childErr, allowance)
		}
	}
	src, _ := parser.Unparse(call, nil)
	return fmt.Sprintf("%s: %v (its operands are constants: it fails whenever it is evaluated, and cel-go folds constant calls "+
		"when it plans the program, so the expression's program cannot be built)", truncate(src), err)
}

// evalConstant evaluates a constant expression on its own; nil when it cannot be rebuilt.
func evalConstant(env *cel.Env, e ast.Expr) error {
	src, err := parser.Unparse(e, nil)
	if err != nil {
		return nil
	}
	checked, iss := env.Compile(src)
	if failed(iss) {
		return nil
	}
	prog, err := env.Program(checked)
	if err == nil {
		_, _, err = prog.Eval(interpreter.EmptyActivation())
	}
	return err
}

// evalChecked plans and evaluates a checked constant expression.
func evalChecked(env *cel.Env, checked *cel.Ast) error {
	prog, err := env.Program(checked)
	if err == nil {
		_, _, err = prog.Eval(interpreter.EmptyActivation())
	}
	return err
}

// constantCalls appends to out the largest calls of e whose operands are all constants, and
// reports whether e itself is constant.
func constantCalls(e ast.NavigableExpr, out *[]ast.NavigableExpr) bool {
	var inner []ast.NavigableExpr
	constant := true
	for _, child := range e.Children() {
		constant = constantCalls(child, &inner) && constant
	}
	switch e.Kind() {
	case ast.IdentKind, ast.ComprehensionKind, ast.UnspecifiedExprKind:
		constant = false
	case ast.CallKind:
		if constant {
			*out = append(*out, e)
			return true
		}
	}
	*out = append(*out, inner...)
	return constant
}
