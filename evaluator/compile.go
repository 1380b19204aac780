package evaluator

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

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
	c := &Compiler{envSet: envSet, limits: limits}
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
	// estimated is the sum of the estimated worst-case costs of its expressions.
	estimated uint64
	// reads are the input paths the policy's expressions read (inputReads): a Set enforces
	// the input bounds of those only. messageReads are those its messageExpressions read,
	// kept apart: a message that fails falls back to the static one, so a bound of a field
	// only a message reads fails that message, not the policy.
	reads, messageReads map[string]bool
	// safety is the compiled built-in safety policy (safety.yaml) of the Compiler that
	// compiled this policy; a Set takes it from its built-in default.
	safety *Policy
}

type program struct {
	path string // field path, e.g. spec.skipRules[2].expression
	prog cel.Program
	// folds: the expression has a comprehension (all, exists, map, filter, …), the only
	// place cel-go checks the context; one without is evaluated without it (run.eval).
	folds bool
	// message: a messageExpression, whose failure falls back to the static message; it is
	// checked against the bounds of the fields only messages read (activation.messageBeyond).
	message bool
	// uncharged is what its evaluation costs beyond cel-go's charge, added to it on every
	// evaluation: the estimate's logical nodes in comprehensions (logicalNodeCharge), at
	// their most iterations.
	uncharged uint64
}

type namedProgram struct {
	name string
	program
	// bound is a variable's (variableBound), held at run time; unused for conditions.
	bound varBound
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
// language version never breaks a stored policy), every other one in NewExpressions, and a
// skip rule name old already repeats is not an error (so that a policy stored before names
// had to be unique keeps serving). The controller, compiling objects already stored, passes p
// itself; an admission webhook passes the old object on update and nil on create.
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
		limits:        c.limits, networks: p.Spec.Match.Networks, safety: c.safety,
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
	// Limits whose static limit exceeds the budget (tests of the runtime limits) opt out: one
	// expression may then be estimated past the budget alone.
	limit, _ := c.limits.staticLimit()
	if budget := uint64(min(c.limits.InterfaceCostBudget, c.limits.TrialCostBudget)); len(cc.errs) == 0 && limit <= budget && cc.estimated > budget {
		cc.errs = append(cc.errs, field.Forbidden(spec, fmt.Sprintf(
			"the estimated worst-case costs of the policy's expressions sum to %d, beyond the interface cost budget %d "+
				"they all draw on: use fewer or cheaper expressions (a variable is evaluated once per interface)", cc.estimated, budget)))
	}
	out.estimated = cc.estimated
	if len(cc.errs) > 0 {
		return nil, cc.errs
	}
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
		path := spec.Child("skipRules").Index(i)
		cc.uniqueSkipRuleName(path.Child("name"), r.Name, ruleNames)
		cc.unreservedSkipRuleName(path.Child("name"), r.Name)
		if !reasonPattern.MatchString(r.Reason) {
			cc.errs = append(cc.errs, field.Invalid(path.Child("reason"), r.Reason,
				"must be CamelCase: a capital letter, then letters and digits"))
		}
		if msg := messageError(r.Message); msg != "" && cc.stored[path.Child("message").String()] != r.Message {
			cc.errs = append(cc.errs, field.Invalid(path.Child("message"), r.Message, msg))
		}
		rule := skipRule{name: r.Name, reason: r.Reason, message: r.Message,
			program: cc.expr(ruleEnv, path.Child("expression"), r.Expression, cel.BoolType)}
		if r.MessageExpression != "" {
			cc.reads = out.messageReads
			mp := cc.expr(ruleEnv, path.Child("messageExpression"), r.MessageExpression, cel.StringType)
			cc.reads = out.reads
			mp.message = true
			rule.messageProgram = &mp
		}
		out.skipRules = append(out.skipRules, rule)
	}
	if s.Hotplug != nil {
		hp := cc.expr(ruleEnv, spec.Child("hotplug", "expression"), s.Hotplug.Expression, cel.BoolType)
		out.hotplug = &hp
	}
}

// uniqueSkipRuleName reports a skip rule named like an earlier one (seen holds the names so
// far): a decision names the rule that fired, which must tell which one it was. A name the
// stored version of the policy already repeats is tolerated (ratcheting), so that a policy
// stored before this check keeps compiling, in the controller and on updates.
func (cc *compilation) uniqueSkipRuleName(path *field.Path, name string, seen map[string]bool) {
	if seen[name] && !cc.storedDuplicateSkipRules[name] {
		cc.errs = append(cc.errs, field.Duplicate(path, name))
	}
	seen[name] = true
}

// conditionName checks a matchCondition's name as the CRD does (a CEL identifier): ipamctl
// compiles files the API server never saw, and must not accept what it would refuse.
func (cc *compilation) conditionName(path *field.Path, name string) {
	if name == "" || !identifierPattern.MatchString(name) || len(name) > 63 {
		cc.errs = append(cc.errs, field.Invalid(path, name,
			"must be a CEL identifier of at most 63 characters: a letter or _, then letters, digits or _"))
	}
}

// ReservedRulePrefix starts the names of the built-in safety policy's rules
// ("vmipam:static-missing", …). A policy's skip rule may not use it: the safety rules can be
// neither replaced nor disabled.
const ReservedRulePrefix = "vmipam:"

// unreservedSkipRuleName reports a skip rule name with ReservedRulePrefix, unless the stored
// version of the policy already has it (ratcheting; such a rule replaces nothing).
func (cc *compilation) unreservedSkipRuleName(path *field.Path, name string) {
	if !cc.builtin && strings.HasPrefix(name, ReservedRulePrefix) && !cc.storedRuleNames[name] {
		cc.errs = append(cc.errs, field.Invalid(path, name,
			"names starting with "+ReservedRulePrefix+" are reserved for vmipam's safety rules, which cannot be replaced"))
	}
}

// skipRuleNames are the skip rule names of old.
func skipRuleNames(old *v1alpha1.ClusterIPAMPolicy) map[string]bool {
	out := map[string]bool{}
	if old != nil {
		for _, r := range old.Spec.SkipRules {
			out[r.Name] = true
		}
	}
	return out
}

// duplicateSkipRuleNames are the skip rule names old repeats.
func duplicateSkipRuleNames(old *v1alpha1.ClusterIPAMPolicy) map[string]bool {
	out := map[string]bool{}
	if old == nil {
		return out
	}
	seen := map[string]bool{}
	for _, r := range old.Spec.SkipRules {
		out[r.Name] = seen[r.Name]
		seen[r.Name] = true
	}
	return out
}

// reasonPattern is the CRD's pattern for skipRules[].reason, checked here too because
// ipamctl compiles files that never went through the API server.
var reasonPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// enums checks the enumerated fields the CRD also validates, for the same reason.
func (cc *compilation) enums(spec *field.Path, out *Policy) {
	if out.FailurePolicy != v1alpha1.FailurePolicyFail && out.FailurePolicy != v1alpha1.FailurePolicyIgnore {
		cc.errs = append(cc.errs, field.NotSupported(spec.Child("failurePolicy"), out.FailurePolicy,
			[]v1alpha1.FailurePolicy{v1alpha1.FailurePolicyFail, v1alpha1.FailurePolicyIgnore}))
	}
	if out.Mode != v1alpha1.PolicyModeEnforce && out.Mode != v1alpha1.PolicyModeAudit {
		cc.errs = append(cc.errs, field.NotSupported(spec.Child("mode"), out.Mode,
			[]v1alpha1.PolicyMode{v1alpha1.PolicyModeEnforce, v1alpha1.PolicyModeAudit}))
	}
	for i, n := range out.networks {
		if n.Type != "Network" && n.Type != "ClusterNetwork" {
			cc.errs = append(cc.errs, field.NotSupported(spec.Child("match", "networks").Index(i).Child("type"),
				n.Type, []string{"Network", "ClusterNetwork"}))
		}
	}
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
	// checkWork is the checkWork of the expressions checked so far (MaxPolicyCheckWork).
	checkWork uint64
	// shared, when set, is the check work the policy shares with others (CompileWithin).
	shared *CheckWorkAllowance
	// visit, when set, sees every expression that type-checks (Lint).
	visit func(path *field.Path, checked *cel.Ast)
	// visitRuleEnv, when set, sees the environment of skip rules and hotplug (Lint).
	visitRuleEnv func(env *environment.EnvSet)
	errs         field.ErrorList
	// reads collects the input paths the compiled expressions read (Policy.reads).
	reads map[string]bool
	// estimated sums the estimated worst-case costs of the expressions compiled (saturating).
	estimated uint64
	// varSizes are the bounds of the variables compiled so far, for the estimator.
	varSizes variableSizes
	// refusedVariables are the variables refused so far, by name, each with the path of its
	// expression: an expression reading one is not blamed for what that refusal leaves unknown.
	refusedVariables map[string]string
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
		before, estimatedBefore := len(cc.errs), cc.estimated
		prog, outType, checked := cc.exprChecked(env, vpath.Child("expression"), v.Expression, nil)
		bound := fixedVariableBound
		if checked != nil {
			var refused string
			if bound, refused = variableBound(checked, cc.varSizes); refused != "" {
				cc.errs = append(cc.errs, field.Forbidden(vpath.Child("expression"), refused))
			} else if bound.fixed && !cc.ratchet.isStored(vpath.Child("expression").String(), v.Expression, i) {
				cc.errs = append(cc.errs, field.Forbidden(vpath.Child("expression"), underivedVariableError))
			}
			if bound.fixed && len(cc.errs) == before {
				cc.estimateWalk(vpath.Child("expression"), outType, cc.estimated-estimatedBefore)
			}
		}
		if len(cc.errs) > before {
			if cc.refusedVariables == nil {
				cc.refusedVariables = map[string]string{}
			}
			cc.refusedVariables[v.Name] = vpath.Child("expression").String()
		}
		if cc.varSizes == nil {
			cc.varSizes = variableSizes{}
		}
		cc.varSizes[v.Name] = bound
		out.variables = append(out.variables, namedProgram{name: v.Name, program: prog, bound: bound})
		fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(outType), true, nil, nil)
		if env, err = cc.withVariables(fields); err != nil {
			cc.errs = append(cc.errs, field.InternalError(vpath, err))
			return nil
		}
	}
	out.variablesType = apiservercel.NewObjectType("vmipam.Variables", fields)
	out.variableIndex = newVariableIndex(out.variables, out.variablesType.CelType().TypeName())
	return env
}

// estimateWalk adds to the policy's estimate what the run-time check of a variable of the
// fixed bound and type t may charge (fixedWalkEstimate), and refuses the variable when that
// and its expression's own estimate (own) exceed the per-call limit: the check is charged to
// the variable's evaluation, so that "admitted" still means it cannot be stopped by a limit
// on an input within the bounds, and many such variables are refused by the budget.
func (cc *compilation) estimateWalk(path *field.Path, t *cel.Type, own uint64) {
	walk := fixedWalkEstimate(t)
	cc.estimated = addSaturating(cc.estimated, walk)
	if limit, kind := cc.c.limits.staticLimit(); addSaturating(own, walk) > limit {
		cc.errs = append(cc.errs, field.Forbidden(path, fmt.Sprintf(
			"estimated worst-case cost %d exceeds the %s limit %d (its expression %d, and %d to check its value "+
				"against the fixed bound of %s, which walks its nested values: derive the bound from literals "+
				"and inputs, or keep fewer nested values)", addSaturating(own, walk), kind, limit, own, walk, fixedVariableBound)))
	}
}

// wholeVariables reports whether e uses `variables` other than as the operand of a field
// selection (variables.x, has(variables.x)). Used whole — made a variable's value, put in a
// list, passed to dyn() and iterated — it let a variable reach itself (a stack overflow that
// killed the process) and made the bounds check of every variable holding it walk all the
// earlier ones again, exponentially in their number, uncharged. Its type (an object of the
// variables declared before) offers nothing that reading by name does not.
func wholeVariables(e ast.Expr) bool {
	operands := map[int64]bool{}
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			operands[e.AsSelect().Operand().ID()] = true
		case ast.IdentKind:
			if e.AsIdent() == "variables" && !operands[e.ID()] {
				found = true
			}
		}
	}))
	return found
}

// iteratesAsVariables reports whether a comprehension of e names an iteration variable
// `variables`. CEL accepts it, and inside it `variables.v` is a field of the element, but the
// bound analysis read it as the policy variable v: a 200,000-character annotation was sized
// as v's one character, and the admitted rule failed on its cost at run time (issue #15,
// tester atk15). The name only shadows, so it is refused rather than scoped.
func iteratesAsVariables(e ast.Expr) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.ComprehensionKind {
			c := e.AsComprehension()
			found = found || c.IterVar() == "variables" || (c.HasIterVar2() && c.IterVar2() == "variables")
		}
	}))
	return found
}

var identifierPattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// celReserved are the words CEL does not accept as identifiers (as in Kubernetes'
// validation of ValidatingAdmissionPolicy variable names).
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true,
	"const": true, "continue": true, "else": true, "for": true, "function": true, "if": true,
	"import": true, "let": true, "loop": true, "package": true, "namespace": true,
	"return": true, "var": true, "void": true, "while": true,
}

// variableNameError says why name cannot be a variable's name, or returns "".
func variableNameError(name string) string {
	switch {
	case name == "":
		return "a name is required"
	case !identifierPattern.MatchString(name) || len(name) > 63:
		return "must be a CEL identifier of at most 63 characters: a letter or _, then letters, digits or _"
	case celReserved[name]:
		return "is a reserved word in CEL"
	}
	return ""
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
	p, t, _ := cc.exprChecked(envSet, path, src, want)
	return p, t
}

// exprChecked is exprType that also returns the checked expression (nil when it did not
// type-check), from which a variable's bound is derived.
func (cc *compilation) exprChecked(envSet *environment.EnvSet, path *field.Path, src string, want *cel.Type) (program, *cel.Type, *ast.AST) {
	mode := environment.NewExpressions
	if cc.ratchet.isStored(path.String(), src, cc.visibleVariables) {
		mode = environment.StoredExpressions
	}
	env, err := envSet.Env(mode)
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, err))
		return program{path: path.String()}, nil, nil
	}
	if src == "" {
		cc.errs = append(cc.errs, field.Required(path, "an expression is required"))
		return program{path: path.String()}, nil, nil
	}
	checked, work, err := guardedCompile(env, src, cc.checkAllowance())
	cc.spendCheckWork(work)
	if err != nil {
		cc.errs = append(cc.errs, field.Invalid(path, src, err.Error()))
		return program{path: path.String()}, nil, nil
	}
	native := checked.NativeRep()
	if wholeVariables(native.Expr()) {
		cc.errs = append(cc.errs, field.Invalid(path, src,
			"`variables` may only be read by name (variables.<name>), not used as a value"))
		return program{path: path.String()}, nil, native
	}
	if iteratesAsVariables(native.Expr()) {
		cc.errs = append(cc.errs, field.Invalid(path, src,
			"an iteration variable may not be named `variables`: it would shadow the policy's variables"))
		return program{path: path.String()}, nil, native
	}
	if cc.visit != nil {
		cc.visit(path, checked)
	}
	if cc.reads != nil {
		inputReads(checked.NativeRep().Expr(), cc.reads)
	}
	outType := checked.OutputType()
	if want != nil && !outType.IsExactType(want) && !outType.IsExactType(cel.DynType) {
		cc.errs = append(cc.errs, field.Invalid(path, src,
			fmt.Sprintf("must evaluate to %s, but evaluates to %s", want, outType)))
		return program{path: path.String()}, nil, native
	}
	if want == cel.StringType && path.String() == "spec.allocation.expression" {
		if err := checkAllocationLiteral(checked.NativeRep().Expr()); err != "" {
			cc.errs = append(cc.errs, field.NotSupported(path, err, allocationValues))
			return program{path: path.String()}, nil, native
		}
	}
	if mode == environment.NewExpressions {
		errs := append(literalGuardErrors(checked.NativeRep().Expr()), nestedFormatErrors(checked)...)
		errs = append(errs, objectConstructionErrors(checked.NativeRep().Expr())...)
		errs = append(errs, literalZoneErrors(checked.NativeRep().Expr())...)
		if errs = append(errs, unorderedSortErrors(checked.NativeRep())...); len(errs) > 0 {
			cc.errs = append(cc.errs, field.Invalid(path, src, strings.Join(errs, "; ")))
			return program{path: path.String()}, nil, native
		}
	}
	est, err := env.EstimateCost(checked, estimatorOf(checked.NativeRep(), cc.varSizes))
	if err != nil {
		cc.errs = append(cc.errs, field.InternalError(path, fmt.Errorf("estimating cost: %w", err)))
		return program{path: path.String()}, nil, native
	}
	// The deep operations are charged at run time by their operands' deep size, which
	// cel-go's estimate does not see (deep_bounds.go).
	deep := deepWalkOf(checked.NativeRep(), cc.varSizes, cc.c.limits.ComprehensionRange)
	deepExtra, deepOps, deepUnbounded := deep.total, deep.ops, deep.unbounded
	if limit, _ := cc.c.limits.staticLimit(); est.Max > limit || len(deepUnbounded) > 0 {
		if msg := refusedVariablesHint(checked.NativeRep().Expr(), cc.refusedVariables); msg != "" {
			cc.errs = append(cc.errs, field.Forbidden(path, msg))
			return program{path: path.String()}, nil, native
		}
	}
	if limit, _ := cc.c.limits.staticLimit(); est.Max <= limit && mode == environment.NewExpressions && len(deepUnbounded) > 0 {
		cc.errs = append(cc.errs, field.Forbidden(path, strings.Join(deepUnbounded, "; ")+
			": compare or search flat values, or values built from literals and inputs"))
		return program{path: path.String()}, nil, native
	}
	shallow := est.Max
	est.Max = addSaturating(est.Max, deepExtra)
	if limit, kind := cc.c.limits.staticLimit(); est.Max > limit {
		hint := unboundedHint(newProbes(env, checked.NativeRep().Expr()), checked.NativeRep().Expr(), est.Max, cc.varSizes)
		if shallow <= limit && len(deepOps) > 0 {
			hint = deepHint(deepOps)
		}
		cc.errs = append(cc.errs, field.Forbidden(path, fmt.Sprintf(
			"estimated worst-case cost %d exceeds the %s limit %d (%s)", est.Max, kind, limit, hint)))
		return program{path: path.String()}, nil, native
	}
	// Within its estimate, a comprehension's work still grows with the square of its range.
	if len(deep.long) > 0 && mode == environment.NewExpressions {
		cc.errs = append(cc.errs, field.Forbidden(path, strings.Join(deep.long, "; ")))
		return program{path: path.String()}, nil, native
	}
	// A constant call that fails is an invalid expression, not a fault of the compiler: new
	// expressions are refused for one wherever it is; a stored one only when planning the
	// program (which folds constants) fails on it.
	if mode == environment.NewExpressions {
		if msg := constantCallError(env, checked); msg != "" {
			cc.errs = append(cc.errs, field.Invalid(path, src, msg))
			return program{path: path.String()}, nil, native
		}
	}
	prog, err := env.Program(checked, orderedRanges(checked)) // map_order.go
	if err != nil {
		msg := constantCallError(env, checked)
		if msg == "" {
			msg = err.Error()
		}
		cc.errs = append(cc.errs, field.Invalid(path, src, msg))
		return program{path: path.String()}, nil, native
	}
	cc.estimated = addSaturating(cc.estimated, est.Max)
	return program{path: path.String(), prog: prog, folds: hasComprehension(checked.NativeRep().Expr()),
		uncharged: deep.uncharged}, outType, native
}

// addSaturating is a+b, or MaxUint64 when it overflows.
func addSaturating(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// guardedCompile parses and checks src, refusing before the checker what must not be built:
// a regex pattern that is not a literal or whose program is beyond the bounds (the checker's
// regex-literal validator compiles every literal pattern), a value of types nested deeper
// than maxTypeDepth (the checker's time grows with the depth of the types it unifies), and an
// expression whose checkWork exceeds allowance (what is left of MaxPolicyCheckWork). work is
// the checkWork spent (0 when src did not parse or was refused before the checker).
func guardedCompile(env *cel.Env, src string, allowance checkAllowance) (checked *cel.Ast, work uint64, err error) {
	parsed, iss := env.Parse(src)
	if failed(iss) {
		if tooDeep(iss) {
			if op, n := longestOperatorChain(src); n >= maxNestingDepth/2 {
				return nil, 0, fmt.Errorf("the expression nests more than %d levels deep, the most an expression may "+
					"(checking one grows with the cube of its nesting): it holds a chain of %d `%s` operators, and each "+
					"is a level; split the chain into variables, or build a string with join() or format()",
					maxNestingDepth, n, op)
			}
			return nil, 0, fmt.Errorf("the expression nests more than %d levels deep (brackets, calls, operands), "+
				"the most an expression may: checking one grows with the cube of its nesting", maxNestingDepth)
		}
		return nil, 0, issuesError(src, iss)
	}
	if errs := regexErrors(parsed.NativeRep().Expr()); len(errs) > 0 {
		return nil, 0, errors.New(strings.Join(errs, "; "))
	}
	if msg := typeDepthError(env, parsed); msg != "" {
		return nil, 0, errors.New(msg)
	}
	if work = checkWork(env.Functions(), parsed.NativeRep().Expr()); work > allowance.left {
		return nil, 0, fmt.Errorf("type-checking the expression would copy ~%d type bindings, beyond the %d left of the %d "+
			"%s may spend together (the work grows with the square of an expression's operations, "+
			"generic ones such as ==, [], in, dyn() and literal lists and maps most): %s",
			work, allowance.left, allowance.total, allowance.of, allowance.advice)
	}
	checked, iss = env.Check(parsed)
	if failed(iss) {
		return nil, work, issuesError(src, iss)
	}
	return checked, work, nil
}

// hasComprehension: e has a comprehension (a macro such as all, exists, map or filter).
func hasComprehension(e ast.Expr) bool {
	found := false
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		found = found || e.Kind() == ast.ComprehensionKind
	}))
	return found
}

// allocationValues are what an allocation expression may return.
var allocationValues = []string{string(AllocationAuto), string(AllocationStatic), string(AllocationNone), AllocationPass}

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
	if old.Spec.Allocation != nil {
		out[spec.Child("allocation", "expression").String()] = old.Spec.Allocation.Expression
	}
	for i, r := range old.Spec.SkipRules {
		out[spec.Child("skipRules").Index(i).Child("expression").String()] = r.Expression
		out[spec.Child("skipRules").Index(i).Child("messageExpression").String()] = r.MessageExpression
		out[spec.Child("skipRules").Index(i).Child("message").String()] = r.Message
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

// longestOperatorChain is the arithmetic operator (+ - * / %) with the longest chain in src
// at one bracket level, and its length. cel-go's parser balances chains of || and && but
// nests every other binary operator left to right, one level an operator: a refusal of a
// long chain `'a' + 'b' + …` for its nesting names the chain, not brackets it does not have.
// String literals are skipped; a '-' after an operator or bracket is a sign, not counted.
func longestOperatorChain(src string) (string, int) {
	type level struct{ counts map[byte]int }
	stack := []level{{counts: map[byte]int{}}}
	bestOp, best := "", 0
	operand := false // the previous token ends an operand: a following '-' is binary
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			if strings.HasPrefix(src[i:], strings.Repeat(string(c), 3)) {
				end := strings.Index(src[i+3:], strings.Repeat(string(c), 3))
				if end < 0 {
					return bestOp, best
				}
				i, operand = i+3+end+2, true
				continue
			}
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			i, operand = j, true
		case c == '(' || c == '[' || c == '{':
			stack, operand = append(stack, level{counts: map[byte]int{}}), false
		case c == ')' || c == ']' || c == '}':
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			operand = true
		case strings.IndexByte("+-*/%", c) >= 0 && (c != '-' || operand):
			counts := stack[len(stack)-1].counts
			counts[c]++
			if counts[c] > best {
				bestOp, best = string(c), counts[c]
			}
			operand = false
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == '=' || c == '!' || c == '<' || c == '>' || c == '&' || c == '|' || c == '?' || c == ':' || c == ',':
			operand = false
			if c == ',' || c == '?' || c == ':' || c == '&' || c == '|' {
				// a new operand list or branch starts a new chain at this level
				stack[len(stack)-1].counts = map[byte]int{}
			}
		default:
			operand = true
		}
	}
	return bestOp, best
}
