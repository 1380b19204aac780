package evaluator_test

import (
	"context"
	"os"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apiserver/pkg/cel/library"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// The benchmarks decide pooledStatic() with no installed policy, the default policy's
// longest path: the allocation (two variables), all ten skip rules (none holds), hotplug, and
// then the twelve rules of the safety policy (none holds). The floors evaluate the same
// expressions of the same two policies in the same order, on the same input, as plain cel-go
// programs over a map activation: no Kubernetes environment, no lazy-variable machinery, no
// input bounds, no trace. Before each program they evaluate the variables it names (once per
// decision; Decide evaluates them lazily, which here differs in one variable of the safety
// policy, `ours`, that a short-circuit spares Decide).
//
//   - BenchmarkBareCEL: no cost tracking, no cost limit, no context: the fastest cel-go can go.
//   - BenchmarkBareCELWithLimits: the options Decide must enforce, as the evaluator configures
//     them: actual-cost tracking with the Kubernetes library's call costs (and has() free),
//     the per-call cost limit, the interrupt check frequency, each program run by ContextEval
//     under the decision's deadline, and its actual cost summed against the interface budget.
//
// BenchmarkDecideDefault reports its ratio to each (x-bare, x-limits) from short rounds
// interleaved after the timed loop, so that a change of load on a shared machine moves all
// three alike.

func BenchmarkDecideDefault(b *testing.B) {
	set := defaultSet(b, newCompiler(b))
	bare, limited := newBarePolicies(b, false), newBarePolicies(b, true)
	in := pooledStatic()
	decide := func() {
		if d := set.Decide(context.Background(), in, evaluator.Options{}); d.Skip || d.Allocation != evaluator.AllocationStatic {
			b.Fatalf("decision = %+v, want Static, not skipped", d)
		}
	}
	decide()
	b.ReportAllocs()
	for b.Loop() {
		set.Decide(context.Background(), in, evaluator.Options{})
	}
	// The floors, untimed by b (testing.Benchmark cannot run inside a benchmark): short rounds
	// of each in turn, as many decisions in all as the timed loop made, compared by their
	// median round, which a preemption on a busy machine does not move.
	const round = 16
	var rounds [3][]time.Duration
	for n := 0; n < b.N; n += round {
		for i, f := range []func(){decide, func() { bare.decide(b, &in) }, func() { limited.decide(b, &in) }} {
			start := time.Now()
			for range round {
				f()
			}
			rounds[i] = append(rounds[i], time.Since(start))
		}
	}
	var median [3]float64
	for i, r := range rounds {
		slices.Sort(r)
		median[i] = float64(r[len(r)/2].Nanoseconds()) / round
	}
	b.ReportMetric(median[1], "bare-ns/op")
	b.ReportMetric(median[2], "limits-ns/op")
	b.ReportMetric(median[0]/median[1], "x-bare")
	b.ReportMetric(median[0]/median[2], "x-limits")
}

func BenchmarkBareCEL(b *testing.B) { benchmarkBare(b, newBarePolicies(b, false)) }

func BenchmarkBareCELWithLimits(b *testing.B) { benchmarkBare(b, newBarePolicies(b, true)) }

func benchmarkBare(b *testing.B, p *barePolicies) {
	in := pooledStatic()
	b.ReportAllocs()
	for b.Loop() {
		if p.decide(b, &in) != "Static" {
			b.Fatal("want Static")
		}
	}
}

// barePolicies are the built-in default policy and the safety policy as plain cel-go programs.
type barePolicies struct {
	defaults, safety *barePolicy
	// limited: evaluate with the evaluator's limits (see BenchmarkBareCELWithLimits).
	limited bool
	limits  evaluator.Limits
}

// barePolicy is one policy's programs.
type barePolicy struct {
	variables  map[string]bareProgram
	allocation bareProgram
	skipRules  []bareProgram
	hotplug    bareProgram
}

// bareProgram is a program and the policy variables it names (variables.<name>).
type bareProgram struct {
	prog cel.Program
	uses []string
}

func newBarePolicies(b *testing.B, limited bool) *barePolicies {
	builtin, err := policies.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile("safety.yaml")
	if err != nil {
		b.Fatal(err)
	}
	docs, err := policies.Decode(data)
	if err != nil || len(docs) != 1 {
		b.Fatalf("safety.yaml: %v", err)
	}
	env, err := cel.NewEnv(bareEnvOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	out := &barePolicies{limited: limited, limits: evaluator.DefaultLimits}
	var opts []cel.ProgramOption
	if limited {
		// What k8s.io/apiserver's base environment and newInputEnvSet (env.go) set.
		opts = []cel.ProgramOption{
			cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
			cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
			cel.CostTracking(&library.CostEstimator{}),
			cel.CostLimit(out.limits.PerCallCostLimit),
			cel.InterruptCheckFrequency(out.limits.CheckFrequency),
		}
	} else {
		opts = []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	}
	out.defaults = compileBare(b, env, opts, &builtin.Spec)
	out.safety = compileBare(b, env, opts, &docs[0].Spec)
	return out
}

func compileBare(b *testing.B, env *cel.Env, opts []cel.ProgramOption, spec *v1alpha1.ClusterIPAMPolicySpec) *barePolicy {
	compile := func(src string) bareProgram {
		checked, iss := env.Compile(src)
		if iss.Err() != nil {
			b.Fatal(iss.Err())
		}
		prog, err := env.Program(checked, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return bareProgram{prog: prog, uses: variablesNamed(checked.NativeRep().Expr())}
	}
	out := &barePolicy{variables: map[string]bareProgram{}}
	for _, v := range spec.Variables {
		out.variables[v.Name] = compile(v.Expression)
	}
	if spec.Allocation != nil {
		out.allocation = compile(spec.Allocation.Expression)
	}
	for _, r := range spec.SkipRules {
		out.skipRules = append(out.skipRules, compile(r.Expression))
	}
	if spec.Hotplug != nil {
		out.hotplug = compile(spec.Hotplug.Expression)
	}
	return out
}

// variablesNamed lists the fields of `variables` that e selects.
func variablesNamed(e ast.Expr) []string {
	var out []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.SelectKind && e.AsSelect().Operand().Kind() == ast.IdentKind &&
			e.AsSelect().Operand().AsIdent() == "variables" {
			out = append(out, e.AsSelect().FieldName())
		}
	}))
	return out
}

// bareEnvOptions declares the same inputs as the evaluator, with variables as a map of dyn.
func bareEnvOptions() []cel.EnvOption {
	types := map[string]any{
		"vm": evaluator.VM{}, "interface": evaluator.Interface{}, "network": evaluator.Network{},
		"ipAddress": evaluator.IPAddress{}, "holders": evaluator.Holders{},
		"namespaceObject": evaluator.Namespace{}, "change": evaluator.Change{},
	}
	var native []any
	opts := []cel.EnvOption{cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("allocation", cel.StringType)}
	for name, v := range types {
		t := reflect.TypeOf(v)
		native = append(native, t)
		opts = append(opts, cel.Variable(name, cel.ObjectType("evaluator."+t.Name())))
	}
	return append([]cel.EnvOption{ext.NativeTypes(append(native, ext.ParseStructTag("json"))...)}, opts...)
}

// bareRun is one decision's state: its deadline (limited) and the cost spent.
type bareRun struct {
	b     *testing.B
	p     *barePolicies
	ctx   context.Context
	spent uint64
}

// decide runs the programs in the evaluator's order and returns the allocation.
func (p *barePolicies) decide(b *testing.B, in *evaluator.Input) string {
	r := &bareRun{b: b, p: p, ctx: context.Background()}
	if p.limited {
		ctx, cancel := context.WithTimeout(r.ctx, p.limits.Deadline)
		defer cancel()
		r.ctx = ctx
	}
	input := func(vars map[string]any) map[string]any {
		return map[string]any{"vm": &in.VM, "interface": &in.Interface, "network": &in.Network,
			"ipAddress": &in.IPAddress, "holders": &in.Holders, "namespaceObject": &in.Namespace,
			"change": &in.Change, "variables": vars}
	}
	act := input(map[string]any{})
	alloc := r.eval(p.defaults, p.defaults.allocation, act).(string)
	act["allocation"] = alloc
	for _, rule := range p.defaults.skipRules {
		if r.eval(p.defaults, rule, act).(bool) {
			b.Fatal("no skip rule should hold")
		}
	}
	_ = r.eval(p.defaults, p.defaults.hotplug, act).(bool)
	act = input(map[string]any{})
	act["allocation"] = alloc
	for _, rule := range p.safety.skipRules {
		if r.eval(p.safety, rule, act).(bool) {
			b.Fatal("no safety rule should hold")
		}
	}
	return alloc
}

// eval evaluates the variables prog names that are not evaluated yet, then prog.
func (r *bareRun) eval(p *barePolicy, prog bareProgram, act map[string]any) any {
	vars := act["variables"].(map[string]any)
	for _, name := range prog.uses {
		if _, done := vars[name]; !done {
			vars[name] = r.eval(p, p.variables[name], act)
		}
	}
	if !r.p.limited {
		v, _, err := prog.prog.Eval(act)
		if err != nil {
			r.b.Fatal(err)
		}
		return v.Value()
	}
	v, det, err := prog.prog.ContextEval(r.ctx, act)
	if err != nil {
		r.b.Fatal(err)
	}
	if r.spent += *det.ActualCost(); r.spent > uint64(r.p.limits.InterfaceCostBudget) {
		r.b.Fatal("interface cost budget exceeded")
	}
	return v.Value()
}
