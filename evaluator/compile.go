package evaluator

import (
	"cmp"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Compiler turns ClusterIPAMPolicies into Policies. It is safe for concurrent use; build one
// per process (building the environment takes about a millisecond).
type Compiler struct {
	envSet *environment.EnvSet
	limits Limits
	cost   cost.Config
	// bounds are the input's bounded fields, which a Set checks for the fields a policy reads.
	bounds *cost.Bounds
	// safety is the built-in safety policy, compiled once; every Policy carries it.
	safety *Policy
}

// NewCompiler builds the CEL environment with the given limits; each zero field takes its
// value from DefaultLimits.
func NewCompiler(limits Limits) (*Compiler, error) {
	limits = limits.withDefaults()
	envSet, err := newInputEnvSet(limits)
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	c := &Compiler{envSet: envSet, limits: limits, cost: costConfig(limits)}
	if c.bounds, err = cost.NewBounds(c.cost.Input); err != nil {
		return nil, err
	}
	if c.safety, err = c.compileSafety(); err != nil {
		return nil, err
	}
	return c, nil
}

// Limits returns the limits the compiler was built with.
func (c *Compiler) Limits() Limits { return c.limits }

// Policy is one compiled generation of a ClusterIPAMPolicy. It is immutable and safe for
// concurrent evaluation.
type Policy struct {
	// Name is the ClusterIPAMPolicy's name.
	Name string
	// Generation is the metadata.generation compiled.
	Generation int64
	// Priority orders the policy in a Set (lower first, then by name).
	Priority int32
	// FailurePolicy is spec.failurePolicy, Fail when unset.
	FailurePolicy v1alpha1.FailurePolicy
	// Mode is spec.mode, Enforce when unset.
	Mode v1alpha1.PolicyMode

	namespaceSelector labels.Selector
	vmSelector        labels.Selector
	networks          []v1alpha1.NetworkSelector

	matchConditions []namedProgram
	variables       []namedProgram
	variablesType   *apiservercel.DeclType
	// variableIndex finds a variable by the field name an expression selects.
	variableIndex variableIndex
	// allocation and hotplug are nil when the policy leaves them to the next policy.
	allocation *program
	skipRules  []skipRule
	hotplug    *program
	limits     Limits
	// warnings are what compiling found worth an admin's attention: expressions estimated
	// beyond the per-call limit they run under.
	warnings []Warning
	// reads are the input paths the policy's expressions read (cost.Config.InputReads): a
	// Set enforces the input bounds of those only. messageReads are those its
	// messageExpressions read, kept apart: a message that fails falls back to the static one,
	// so a bound of a field only a message reads fails that message, not the policy.
	reads, messageReads map[string]bool
	// bounds are the input's bounded fields (the Compiler's).
	bounds *cost.Bounds
	// safety is the compiled built-in safety policy (safety.yaml) of the Compiler that
	// compiled this policy; a Set takes it from its built-in default.
	safety *Policy
}

// Warnings are what compiling p found that an admin should see though p compiled: each
// expression whose estimated worst-case cost exceeds the per-call limit it runs under (the
// run time stops it on inputs near the declared bounds), and a policy whose estimates sum
// beyond the interface budget. The admission webhook, ipamctl lint and the policy's status
// show them.
func (p *Policy) Warnings() []Warning {
	if p == nil {
		return nil
	}
	return p.warnings
}

type program struct {
	path string // field path, e.g. spec.skipRules[2].expression
	prog cel.Program
	// message: a messageExpression, whose failure falls back to the static message; it is
	// checked against the bounds of the fields only messages read (activation.messageBeyond).
	message bool
	// interruptible: the expression has a comprehension or more than maxUncheckedCalls calls,
	// and runs under ContextEval, which checks the deadline between iterations and before
	// calls; one without runs under Eval, which sets no context up.
	interruptible bool
}

// maxUncheckedCalls is how many calls an expression may make without the deadline checked
// between them. An expensive call (a long string's traversal, a regex) is charged by its
// input, so the per-call limit stops a few; cheap ones are microseconds.
const maxUncheckedCalls = 16

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
// returned together, each with its field path (e.g. spec.skipRules[0].expression). Names of
// variables and of skip rules must be unique (a Duplicate error at spec.skipRules[1].name).
//
// old is the previously stored version of the policy, if any: an expression unchanged at the
// same path compiles in the StoredExpressions environment (so a library removed in a later
// language version never breaks a stored policy) without the checks only new expressions
// get, every other one in NewExpressions, and a skip rule name old already repeats is not an
// error (so that a policy stored before names had to be unique keeps serving). The
// controller, compiling objects already stored, passes p itself; an admission webhook passes
// the old object on update and nil on create.
func (c *Compiler) Compile(p, old *v1alpha1.ClusterIPAMPolicy) (*Policy, field.ErrorList) {
	return c.compile(p, old, false)
}

// compile is Compile; builtin allows the reserved rule names (the safety policy's).
func (c *Compiler) compile(p, old *v1alpha1.ClusterIPAMPolicy, builtin bool) (*Policy, field.ErrorList) {
	return c.compileWith(c.newCompilation(p, old, builtin), p)
}

// newCompilation is the compilation of p, whose stored version is old (nil for none).
func (c *Compiler) newCompilation(p, old *v1alpha1.ClusterIPAMPolicy, builtin bool) *compilation {
	return &compilation{c: c, stored: storedExpressions(old), ratchet: newRatchet(c.envSet, p, old),
		storedDuplicateSkipRules: duplicateSkipRuleNames(old), visibleVariables: allVariables,
		storedRuleNames: skipRuleNames(old), builtin: builtin}
}

// compileWith compiles p in the compilation cc.
func (c *Compiler) compileWith(cc *compilation, p *v1alpha1.ClusterIPAMPolicy) (*Policy, field.ErrorList) {
	spec := field.NewPath("spec")
	if err := sourceSize(spec, &p.Spec); err != nil {
		return nil, field.ErrorList{err} // before compiling anything: the bound is on that work
	}
	out := &Policy{
		Name: p.Name, Generation: p.Generation, Priority: p.Spec.Priority,
		FailurePolicy: cmp.Or(p.Spec.FailurePolicy, v1alpha1.FailurePolicyFail),
		Mode:          cmp.Or(p.Spec.Mode, v1alpha1.PolicyModeEnforce),
		limits:        c.limits, networks: p.Spec.Match.Networks, safety: c.safety, bounds: c.bounds,
		reads: map[string]bool{}, messageReads: map[string]bool{},
	}
	cc.reads = out.reads
	if p.Spec.Allocation == nil && len(p.Spec.SkipRules) == 0 && p.Spec.Hotplug == nil {
		cc.errs = append(cc.errs, field.Required(spec,
			"a policy must set at least one of allocation, skipRules, hotplug (what it does not set falls through to the next policy)"))
	}
	cc.enums(spec, out)
	out.namespaceSelector = cc.selector(spec.Child("match", "namespaceSelector"), p.Spec.Match.NamespaceSelector)
	out.vmSelector = cc.selector(spec.Child("match", "vmSelector"), p.Spec.Match.VMSelector)
	env := cc.compileVariables(spec.Child("variables"), p.Spec.Variables, out)
	if env == nil {
		return nil, cc.errs
	}
	ruleEnv, err := withAllocation(env)
	if err != nil {
		return nil, append(cc.errs, field.InternalError(spec, err))
	}
	if cc.visitRuleEnv != nil {
		cc.visitRuleEnv(ruleEnv)
	}
	cc.compileExpressions(env, ruleEnv, spec, &p.Spec, out)
	if len(cc.errs) > 0 {
		return nil, cc.errs
	}
	if budget := uint64(c.limits.InterfaceCostBudget); cc.estimated > budget {
		cc.warnings = append(cc.warnings, Warning{spec.String(), fmt.Sprintf(
			"the estimated worst-case costs of the policy's expressions sum to %d, beyond the interface cost budget %d "+
				"they draw on together: on inputs near the declared bounds the run time stops the policy with a PolicyError",
			cc.estimated, budget)})
	}
	out.warnings = cc.warnings
	return out, nil
}

// compileExpressions compiles matchConditions and allocation in env, and skipRules and
// hotplug in ruleEnv, which also declares `allocation` (the decided allocation).
func (cc *compilation) compileExpressions(env, ruleEnv *environment.EnvSet, spec *field.Path, s *v1alpha1.ClusterIPAMPolicySpec, out *Policy) {
	for i, mc := range s.MatchConditions {
		cc.conditionName(spec.Child("matchConditions").Index(i).Child("name"), mc.Name)
		path := spec.Child("matchConditions").Index(i).Child("expression")
		out.matchConditions = append(out.matchConditions, namedProgram{name: mc.Name, program: cc.expr(env, path, mc.Expression, cel.BoolType)})
	}
	if s.Allocation != nil {
		alloc := cc.expr(env, spec.Child("allocation", "expression"), s.Allocation.Expression, cel.StringType)
		out.allocation = &alloc
	}
	ruleNames := make(map[string]bool, len(s.SkipRules))
	for i, r := range s.SkipRules {
		out.skipRules = append(out.skipRules, cc.skipRule(ruleEnv, spec.Child("skipRules").Index(i), r, ruleNames, out))
	}
	if s.Hotplug != nil {
		hp := cc.expr(ruleEnv, spec.Child("hotplug", "expression"), s.Hotplug.Expression, cel.BoolType)
		out.hotplug = &hp
	}
}

// skipRule compiles the skip rule r at path; seen holds the names of the rules before it.
func (cc *compilation) skipRule(env *environment.EnvSet, path *field.Path, r v1alpha1.SkipRule, seen map[string]bool, out *Policy) skipRule {
	cc.uniqueSkipRuleName(path.Child("name"), r.Name, seen)
	cc.unreservedSkipRuleName(path.Child("name"), r.Name)
	if !reasonPattern.MatchString(r.Reason) {
		cc.errs = append(cc.errs, field.Invalid(path.Child("reason"), r.Reason,
			"must be CamelCase: a capital letter, then letters and digits"))
	}
	if msg := messageError(r.Message); msg != "" && cc.stored[path.Child("message").String()] != r.Message {
		cc.errs = append(cc.errs, field.Invalid(path.Child("message"), r.Message, msg))
	}
	rule := skipRule{name: r.Name, reason: r.Reason, message: r.Message,
		program: cc.expr(env, path.Child("expression"), r.Expression, cel.BoolType)}
	if r.MessageExpression != "" {
		cc.reads, cc.message = out.messageReads, true
		mp := cc.expr(env, path.Child("messageExpression"), r.MessageExpression, cel.StringType)
		cc.reads, cc.message = out.reads, false
		mp.message = true
		rule.messageProgram = &mp
	}
	return rule
}

// compilation collects the errors of one Compile call.
type compilation struct {
	c      *Compiler
	stored map[string]string
	// ratchet decides which expressions compile as stored: unchanged text and meaning.
	ratchet *ratchet
	// visibleVariables is how many of the variables the expression compiled sees (those
	// before it while compiling spec.variables, allVariables after).
	visibleVariables int
	// storedDuplicateSkipRules are the skip rule names the stored version repeats.
	storedDuplicateSkipRules map[string]bool
	// storedRuleNames are the skip rule names of the stored version.
	storedRuleNames map[string]bool
	// builtin: compiling the safety policy, whose rule names are reserved.
	builtin bool
	// checkWork is the cost.CheckWork of the expressions checked so far (MaxPolicyCheckWork).
	checkWork uint64
	// shared, when set, is the check work the policy shares with others (CompileWithin).
	shared *CheckWorkAllowance
	// visit, when set, sees every expression that type-checks (Lint).
	visit func(path *field.Path, checked *cel.Ast)
	// visitRuleEnv, when set, sees the environment of skip rules and hotplug (Lint).
	visitRuleEnv func(env *environment.EnvSet)
	errs         field.ErrorList
	warnings     []Warning
	// reads collects the input paths the compiled expressions read (Policy.reads).
	reads map[string]bool
	// message: the expression compiled is a messageExpression.
	message bool
	// estimated sums the estimated worst-case costs of the expressions compiled (saturating).
	estimated uint64
	// varSizes are the sizes of the variables compiled so far, for the estimate.
	varSizes cost.Sizes
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
	defer func() { cc.visibleVariables = allVariables }()
	cc.varSizes = cost.Sizes{}
	for i, v := range vars {
		vpath := path.Index(i)
		cc.visibleVariables = i
		if msg := variableNameError(v.Name); msg != "" {
			cc.errs = append(cc.errs, field.Invalid(vpath.Child("name"), v.Name, msg))
			continue
		}
		if _, dup := fields[v.Name]; dup {
			cc.errs = append(cc.errs, field.Duplicate(vpath.Child("name"), v.Name))
			continue
		}
		compiled := cc.exprType(env, vpath.Child("expression"), v.Expression, nil)
		cc.varSizes[v.Name] = compiled.size
		out.variables = append(out.variables, namedProgram{name: v.Name, program: compiled.program})
		fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(compiled.typ), true, nil, nil)
		if env, err = cc.withVariables(fields); err != nil {
			cc.errs = append(cc.errs, field.InternalError(vpath, err))
			return nil
		}
	}
	out.variablesType = apiservercel.NewObjectType(variablesTypeName, fields)
	out.variableIndex = newVariableIndex(out.variables, out.variablesType.CelType().TypeName())
	return env
}

// withAllocation extends env with `allocation`, the allocation decided for the interface
// ("Auto", "Static" or "None"), which skip rules and hotplug see and variables, match
// conditions and allocation expressions do not (the allocation is decided from them).
func withAllocation(env *environment.EnvSet) (*environment.EnvSet, error) {
	return env.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("allocation", cel.StringType)},
	})
}

// withVariables extends the input environment with `variables`, an object of the given fields.
func (cc *compilation) withVariables(fields map[string]*apiservercel.DeclField) (*environment.EnvSet, error) {
	copied := make(map[string]*apiservercel.DeclField, len(fields))
	for k, v := range fields {
		copied[k] = v
	}
	t := apiservercel.NewObjectType(variablesTypeName, copied)
	return cc.c.envSet.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		DeclTypes:         []*apiservercel.DeclType{t},
		EnvOptions:        []cel.EnvOption{cel.Variable("variables", t.CelType())},
	})
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
