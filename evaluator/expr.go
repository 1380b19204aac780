package evaluator

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
)

// compiled is one compiled expression: its program (prog nil when it did not compile), its
// result type and the size of its value, for a variable.
type compiled struct {
	program
	typ  *cel.Type
	size cost.Size
}

func (cc *compilation) expr(env *environment.EnvSet, path *field.Path, src string, want *cel.Type) program {
	return cc.exprType(env, path, src, want).program
}

// exprType compiles the expression src at path, a short pipeline: choose the environment
// (stored or new), parse and type-check within the compile-work bounds, accept its shape and
// result type, estimate its cost, plan its program. The first step that refuses adds its
// error and ends it. want, when non-nil, is the result type the expression must have (dyn is
// accepted and checked at evaluation time).
func (cc *compilation) exprType(envSet *environment.EnvSet, path *field.Path, src string, want *cel.Type) compiled {
	out := compiled{program: program{path: path.String()}}
	if src == "" {
		cc.errs = append(cc.errs, field.Required(path, "an expression is required"))
		return out
	}
	stored := cc.ratchet.isStored(path.String(), src, cc.visibleVariables)
	mode := environment.NewExpressions
	if stored {
		mode = environment.StoredExpressions
	}
	env, err := envSet.Env(mode)
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, err))
		return out
	}
	checked, err := cc.check(env, src)
	if err == nil {
		err = cc.accept(env, path, checked, want, stored)
	}
	if err == nil {
		out.size, err = cc.estimate(env, path, checked, stored)
	}
	if err == nil {
		out.interruptible = needsContext(checked.NativeRep().Expr())
		out.prog, err = cc.plan(env, checked, out.interruptible)
	}
	if err != nil {
		cc.errs = append(cc.errs, refusal(path, src, err))
		return compiled{program: program{path: path.String()}}
	}
	out.typ = checked.OutputType()
	return out
}

// forbidden is a refusal of an expression for its cost, not for being invalid.
type forbidden string

func (f forbidden) Error() string { return string(f) }

// refusal is the field error of the expression src at path refused for err.
func refusal(path *field.Path, src string, err error) *field.Error {
	if f, ok := err.(forbidden); ok {
		return field.Forbidden(path, string(f))
	}
	if u, ok := err.(unsupportedAllocation); ok {
		return field.NotSupported(path, string(u), allocationValues)
	}
	return field.Invalid(path, src, err.Error())
}

// unsupportedAllocation is an allocation expression's literal outside the enum.
type unsupportedAllocation string

func (u unsupportedAllocation) Error() string { return string(u) }

// check parses and type-checks src, refusing before the checker what must not be checked
// (cost.Config.Precheck), within what is left of the policy's check work.
func (cc *compilation) check(env *cel.Env, src string) (*cel.Ast, error) {
	checked, work, err := parseAndCheck(cc.c.cost, env, src, cc.checkAllowance())
	cc.spendCheckWork(work)
	return checked, err
}

// parseAndCheck parses and type-checks src within allowance; work is the check work spent.
func parseAndCheck(cfg cost.Config, env *cel.Env, src string, allowance cost.Allowance) (*cel.Ast, uint64, error) {
	parsed, iss := env.Parse(src)
	if failed(iss) {
		if tooDeep(iss) {
			return nil, 0, cost.NestingError(src)
		}
		return nil, 0, issuesError(src, iss)
	}
	work, err := cfg.Precheck(env, parsed, allowance)
	if err != nil {
		return nil, work, err
	}
	checked, iss := env.Check(parsed)
	if failed(iss) {
		return nil, work, issuesError(src, iss)
	}
	return checked, work, nil
}

// accept refuses what type-checks but the semantics do not allow: `variables` used whole or
// shadowed, a result of the wrong type or an allocation literal outside the enum, and in a
// new expression a call that fails whenever it is evaluated (a guarded call or a time zone
// past its bound on literals, a constant call that fails) or a sort of values of no known
// order. It records what the expression reads.
func (cc *compilation) accept(env *cel.Env, path *field.Path, checked *cel.Ast, want *cel.Type, stored bool) error {
	e := checked.NativeRep().Expr()
	switch {
	case wholeVariables(e):
		return fmt.Errorf("`variables` may only be read by name (variables.<name>), not used as a value")
	case iteratesAsVariables(e):
		return fmt.Errorf("an iteration variable may not be named `variables`: it would shadow the policy's variables")
	}
	if cc.visit != nil {
		cc.visit(path, checked)
	}
	if cc.reads != nil {
		cc.c.cost.InputReads(e, cc.reads)
	}
	if out := checked.OutputType(); want != nil && !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return fmt.Errorf("must evaluate to %s, but evaluates to %s", want, out)
	}
	if want == cel.StringType && path.String() == "spec.allocation.expression" {
		if bad := checkAllocationLiteral(e); bad != "" {
			return unsupportedAllocation(bad)
		}
	}
	if stored {
		return nil
	}
	if cc.message {
		if why := alwaysFallsBack(e); why != "" {
			return fmt.Errorf("%s", why)
		}
	}
	errs := append(cc.c.cost.LiteralErrors(e), unorderedSortErrors(checked.NativeRep())...)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if msg := constantCallError(env, checked); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// estimate estimates the expression's worst-case cost: beyond the static limit a new one is
// refused; beyond the per-call limit it is admitted with a warning. It returns the size of the
// expression's value, for a variable.
func (cc *compilation) estimate(env *cel.Env, path *field.Path, checked *cel.Ast, stored bool) (cost.Size, error) {
	est, err := cc.c.cost.Estimate(env, checked, cc.varSizes)
	if err != nil {
		return cost.Size{}, fmt.Errorf("estimating its cost: %w", err)
	}
	if msg := cc.c.cost.Refusal(est.Cost); msg != "" && !stored {
		return cost.Size{}, forbidden(msg)
	}
	if msg := cc.c.cost.Warning(est.Cost); msg != "" {
		cc.warnings = append(cc.warnings, Warning{Field: path.String(), Message: msg})
	}
	cc.estimated = addSaturating(cc.estimated, est.Cost)
	return est.Size, nil
}

// plan builds the expression's program, its comprehension ranges bounded and maps iterated in
// key order (orderedRanges), its calls checking the deadline when interruptible. A stored
// expression whose program cannot be planned because a constant call fails (cel-go folds
// constants when it plans) is refused naming that call.
func (cc *compilation) plan(env *cel.Env, checked *cel.Ast, interruptible bool) (cel.Program, error) {
	opts := []cel.ProgramOption{orderedRanges(checked, cc.c.cost)}
	if interruptible {
		opts = append(opts, cost.Interruptible)
	}
	prog, err := env.Program(checked, opts...)
	if err == nil {
		return prog, nil
	}
	if msg := constantCallError(env, checked); msg != "" {
		return nil, fmt.Errorf("%s", msg)
	}
	return nil, err
}

// needsContext: e has a comprehension or more than maxUncheckedCalls calls (program.interruptible).
func needsContext(e ast.Expr) bool {
	calls, folds := 0, false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.CallKind:
			calls++
		case ast.ComprehensionKind:
			folds = true
		}
	}))
	return folds || calls > maxUncheckedCalls
}

// addSaturating is a+b, or MaxUint64 when it overflows.
func addSaturating(a, b uint64) uint64 {
	if a > ^uint64(0)-b {
		return ^uint64(0)
	}
	return a + b
}
