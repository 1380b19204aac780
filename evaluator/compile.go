package evaluator

import (
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Compiler turns ClusterIPAMPolicies into Policies. It is safe for concurrent use; build one
// per process (building the environment takes about a millisecond).
type Compiler struct {
	envSet *environment.EnvSet
	limits Limits
}

// NewCompiler builds the CEL environment with the given limits (DefaultLimits when zero).
func NewCompiler(limits Limits) (*Compiler, error) {
	if limits == (Limits{}) {
		limits = DefaultLimits
	}
	envSet, err := newInputEnvSet(limits)
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	return &Compiler{envSet: envSet, limits: limits}, nil
}

// Limits returns the limits the compiler was built with.
func (c *Compiler) Limits() Limits { return c.limits }

// Policy is one compiled generation of a ClusterIPAMPolicy. It is immutable and safe for
// concurrent evaluation.
type Policy struct {
	Name          string
	Generation    int64
	Priority      int32
	FailurePolicy v1alpha1.FailurePolicy
	Mode          v1alpha1.PolicyMode

	namespaceSelector labels.Selector
	vmSelector        labels.Selector
	networks          []v1alpha1.NetworkSelector

	matchConditions []namedProgram
	variables       []namedProgram
	variablesType   *apiservercel.DeclType
	allocation      program
	skipRules       []skipRule
	hotplug         *program
	limits          Limits
}

type program struct {
	path string // field path, e.g. spec.skipRules[2].expression
	prog cel.Program
}

type namedProgram struct {
	name string
	program
}

type skipRule struct {
	name, reason, message string
	program
	messageProgram *program
}

// Compile compiles one generation of p. Every expression is parsed, type-checked against the
// declared inputs, checked for its result type and statically cost-estimated; all problems are
// returned together, each with its field path (e.g. spec.skipRules[0].expression).
//
// old is the previously stored version of the policy, if any: an expression unchanged at the
// same path compiles in the StoredExpressions environment (so a library removed in a later
// language version never breaks a stored policy), every other one in NewExpressions. The
// controller, compiling objects already stored, passes p itself; an admission webhook passes
// the old object on update and nil on create.
func (c *Compiler) Compile(p, old *v1alpha1.ClusterIPAMPolicy) (*Policy, field.ErrorList) {
	cc := &compilation{c: c, stored: storedExpressions(old)}
	spec := field.NewPath("spec")
	out := &Policy{
		Name: p.Name, Generation: p.Generation, Priority: p.Spec.Priority,
		FailurePolicy: p.Spec.FailurePolicy, Mode: p.Spec.Mode, limits: c.limits,
		networks: p.Spec.Match.Networks,
	}
	if out.FailurePolicy == "" {
		out.FailurePolicy = v1alpha1.FailurePolicyFail
	}
	if out.Mode == "" {
		out.Mode = v1alpha1.PolicyModeEnforce
	}
	out.namespaceSelector = cc.selector(spec.Child("match", "namespaceSelector"), p.Spec.Match.NamespaceSelector)
	out.vmSelector = cc.selector(spec.Child("match", "vmSelector"), p.Spec.Match.VMSelector)

	env := cc.compileVariables(spec.Child("variables"), p.Spec.Variables, out)
	if env == nil {
		return nil, cc.errs
	}
	for i, mc := range p.Spec.MatchConditions {
		path := spec.Child("matchConditions").Index(i).Child("expression")
		out.matchConditions = append(out.matchConditions, namedProgram{mc.Name, cc.expr(env, path, mc.Expression, cel.BoolType)})
	}
	out.allocation = cc.expr(env, spec.Child("allocation", "expression"), p.Spec.Allocation.Expression, cel.StringType)
	for i, r := range p.Spec.SkipRules {
		path := spec.Child("skipRules").Index(i)
		rule := skipRule{name: r.Name, reason: r.Reason, message: r.Message,
			program: cc.expr(env, path.Child("expression"), r.Expression, cel.BoolType)}
		if r.MessageExpression != "" {
			mp := cc.expr(env, path.Child("messageExpression"), r.MessageExpression, cel.StringType)
			rule.messageProgram = &mp
		}
		out.skipRules = append(out.skipRules, rule)
	}
	if p.Spec.Hotplug != nil {
		hp := cc.expr(env, spec.Child("hotplug", "expression"), p.Spec.Hotplug.Expression, cel.BoolType)
		out.hotplug = &hp
	}
	if len(cc.errs) > 0 {
		return nil, cc.errs
	}
	return out, nil
}

// compilation collects the errors of one Compile call.
type compilation struct {
	c      *Compiler
	stored map[string]string
	errs   field.ErrorList
}

func (cc *compilation) selector(path *field.Path, s *v1.LabelSelector) labels.Selector {
	if s == nil {
		return labels.Everything()
	}
	sel, err := v1.LabelSelectorAsSelector(s)
	if err != nil {
		cc.errs = append(cc.errs, field.Invalid(path, s, err.Error()))
		return labels.Nothing()
	}
	return sel
}

// compileVariables compiles the variables in order, each seeing the ones before it, and
// returns the environment the policy's other expressions compile in, or nil when the
// environment itself could not be built.
func (cc *compilation) compileVariables(path *field.Path, vars []v1alpha1.NamedExpression, out *Policy) *environment.EnvSet {
	fields := map[string]*apiservercel.DeclField{}
	env, err := cc.withVariables(fields)
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, err))
		return nil
	}
	for i, v := range vars {
		vpath := path.Index(i)
		if _, dup := fields[v.Name]; dup {
			cc.errs = append(cc.errs, field.Duplicate(vpath.Child("name"), v.Name))
			continue
		}
		prog, outType := cc.exprType(env, vpath.Child("expression"), v.Expression, nil)
		out.variables = append(out.variables, namedProgram{v.Name, prog})
		fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(outType), true, nil, nil)
		if env, err = cc.withVariables(fields); err != nil {
			cc.errs = append(cc.errs, field.InternalError(vpath, err))
			return nil
		}
	}
	out.variablesType = apiservercel.NewObjectType("vmipam.Variables", fields)
	return env
}

// withVariables extends the input environment with `variables`, an object of the given fields.
func (cc *compilation) withVariables(fields map[string]*apiservercel.DeclField) (*environment.EnvSet, error) {
	copied := make(map[string]*apiservercel.DeclField, len(fields))
	for k, v := range fields {
		copied[k] = v
	}
	t := apiservercel.NewObjectType("vmipam.Variables", copied)
	return cc.c.envSet.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		DeclTypes:         []*apiservercel.DeclType{t},
		EnvOptions:        []cel.EnvOption{cel.Variable("variables", t.CelType())},
	})
}

func (cc *compilation) expr(env *environment.EnvSet, path *field.Path, src string, want *cel.Type) program {
	p, _ := cc.exprType(env, path, src, want)
	return p
}

// exprType compiles one expression; want, when non-nil, is the result type it must have (an
// expression of type dyn is accepted and checked at evaluation time).
func (cc *compilation) exprType(envSet *environment.EnvSet, path *field.Path, src string, want *cel.Type) (program, *cel.Type) {
	mode := environment.NewExpressions
	if cc.stored[path.String()] == src {
		mode = environment.StoredExpressions
	}
	env, err := envSet.Env(mode)
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, err))
		return program{path: path.String()}, nil
	}
	if src == "" {
		cc.errs = append(cc.errs, field.Required(path, "an expression is required"))
		return program{path: path.String()}, nil
	}
	checked, iss := env.Compile(src)
	if iss.Err() != nil {
		cc.errs = append(cc.errs, field.Invalid(path, src, iss.Err().Error()))
		return program{path: path.String()}, nil
	}
	outType := checked.OutputType()
	if want != nil && !outType.IsExactType(want) && !outType.IsExactType(cel.DynType) {
		cc.errs = append(cc.errs, field.Invalid(path, src,
			fmt.Sprintf("must evaluate to %s, but evaluates to %s", want, outType)))
		return program{path: path.String()}, nil
	}
	if want == cel.StringType && path.String() == "spec.allocation.expression" {
		if err := checkAllocationLiteral(checked.NativeRep().Expr()); err != "" {
			cc.errs = append(cc.errs, field.NotSupported(path, err, allocationValues))
			return program{path: path.String()}, nil
		}
	}
	est, err := env.EstimateCost(checked, costEstimator)
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, fmt.Errorf("estimating cost: %w", err)))
		return program{path: path.String()}, nil
	}
	if est.Max > cc.c.limits.StaticCostLimit {
		cc.errs = append(cc.errs, field.Forbidden(path, fmt.Sprintf(
			"estimated worst-case cost %d exceeds the limit %d (iterate over fewer or bounded lists)",
			est.Max, cc.c.limits.StaticCostLimit)))
		return program{path: path.String()}, nil
	}
	prog, err := env.Program(checked)
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, err))
		return program{path: path.String()}, nil
	}
	return program{path: path.String(), prog: prog}, outType
}

var allocationValues = []string{string(AllocationAuto), string(AllocationStatic), string(AllocationNone)}

// checkAllocationLiteral returns the offending value when the allocation expression is a
// string literal outside the enum (or a conditional whose branches are such literals).
func checkAllocationLiteral(e ast.Expr) string {
	switch e.Kind() {
	case ast.LiteralKind:
		if s, ok := e.AsLiteral().(types.String); ok && !validAllocation(string(s)) {
			return string(s)
		}
	case ast.CallKind:
		if c := e.AsCall(); c.FunctionName() == "_?_:_" && len(c.Args()) == 3 {
			if bad := checkAllocationLiteral(c.Args()[1]); bad != "" {
				return bad
			}
			return checkAllocationLiteral(c.Args()[2])
		}
	}
	return ""
}

func validAllocation(s string) bool {
	for _, v := range allocationValues {
		if s == v {
			return true
		}
	}
	return false
}

// storedExpressions indexes the expressions of the previously stored policy by field path.
func storedExpressions(old *v1alpha1.ClusterIPAMPolicy) map[string]string {
	out := map[string]string{}
	if old == nil {
		return out
	}
	spec := field.NewPath("spec")
	for i, v := range old.Spec.Variables {
		out[spec.Child("variables").Index(i).Child("expression").String()] = v.Expression
	}
	for i, m := range old.Spec.MatchConditions {
		out[spec.Child("matchConditions").Index(i).Child("expression").String()] = m.Expression
	}
	out[spec.Child("allocation", "expression").String()] = old.Spec.Allocation.Expression
	for i, r := range old.Spec.SkipRules {
		out[spec.Child("skipRules").Index(i).Child("expression").String()] = r.Expression
		out[spec.Child("skipRules").Index(i).Child("messageExpression").String()] = r.MessageExpression
	}
	if old.Spec.Hotplug != nil {
		out[spec.Child("hotplug", "expression").String()] = old.Spec.Hotplug.Expression
	}
	return out
}

// declTypeOf converts a variable's checked CEL type into the DeclType of its field in
// `variables`, so that expressions using it are type-checked too. Types without a DeclType
// equivalent (our native input objects) become dyn and are checked at evaluation time.
func declTypeOf(t *cel.Type) *apiservercel.DeclType {
	if t == nil {
		return apiservercel.DynType
	}
	switch {
	case t.IsExactType(cel.BoolType):
		return apiservercel.BoolType
	case t.IsExactType(cel.IntType):
		return apiservercel.IntType
	case t.IsExactType(cel.UintType):
		return apiservercel.UintType
	case t.IsExactType(cel.DoubleType):
		return apiservercel.DoubleType
	case t.IsExactType(cel.StringType):
		return apiservercel.StringType
	case t.IsExactType(cel.BytesType):
		return apiservercel.BytesType
	case t.IsExactType(cel.DurationType):
		return apiservercel.DurationType
	case t.IsExactType(cel.TimestampType):
		return apiservercel.TimestampType
	}
	switch params := t.Parameters(); {
	case t.Kind() == types.ListKind && len(params) == 1:
		return apiservercel.NewListType(declTypeOf(params[0]), -1)
	case t.Kind() == types.MapKind && len(params) == 2:
		return apiservercel.NewMapType(declTypeOf(params[0]), declTypeOf(params[1]), -1)
	}
	return apiservercel.DynType
}

var _ = reflect.TypeFor[Input]
