package evaluator_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
)

// The benchmarks decide pooledStatic(), the default policy's longest path: three variables,
// the allocation, all ten skip rules (none holds) and hotplug. BenchmarkBareCEL evaluates the
// same expressions on the same input as plain cel-go programs: no Kubernetes environment, no
// cost tracking, no deadline, variables evaluated eagerly into a map. BenchmarkDecideDefault
// reports the ratio between the two as x-bare.

func BenchmarkDecideDefault(b *testing.B) {
	set := defaultSet(b, newCompiler(b))
	bare := bareDefaultPolicy(b)
	in := pooledStatic()
	if d := set.Decide(context.Background(), in, evaluator.Options{}); d.Skip || d.Allocation != evaluator.AllocationStatic {
		b.Fatalf("decision = %+v, want Static, not skipped", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		set.Decide(context.Background(), in, evaluator.Options{})
	}
	// The baseline, as many times, untimed (testing.Benchmark cannot run inside a benchmark).
	engine := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	start := time.Now()
	for range b.N {
		bare.decide(b, &in)
	}
	baseline := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(baseline, "bare-ns/op")
	b.ReportMetric(engine/baseline, "x-bare")
}

func BenchmarkBareCEL(b *testing.B) {
	progs := bareDefaultPolicy(b)
	in := pooledStatic()
	b.ReportAllocs()
	for b.Loop() {
		if progs.decide(b, &in) != "Static" {
			b.Fatal("want Static")
		}
	}
}

// barePolicy is the default policy as plain cel-go programs.
type barePolicy struct {
	variables  map[string]cel.Program
	names      []string
	allocation cel.Program
	skipRules  []cel.Program
	hotplug    cel.Program
}

func bareDefaultPolicy(b *testing.B) *barePolicy {
	p, err := policies.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	env, err := cel.NewEnv(bareEnvOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	compile := func(src string) cel.Program {
		ast, iss := env.Compile(src)
		if iss.Err() != nil {
			b.Fatal(iss.Err())
		}
		prog, err := env.Program(ast)
		if err != nil {
			b.Fatal(err)
		}
		return prog
	}
	out := &barePolicy{variables: map[string]cel.Program{}}
	for _, v := range p.Spec.Variables {
		out.names = append(out.names, v.Name)
		out.variables[v.Name] = compile(v.Expression)
	}
	out.allocation = compile(p.Spec.Allocation.Expression)
	for _, r := range p.Spec.SkipRules {
		out.skipRules = append(out.skipRules, compile(r.Expression))
	}
	out.hotplug = compile(p.Spec.Hotplug.Expression)
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

// decide runs the programs in the evaluator's order and returns the allocation.
func (p *barePolicy) decide(b *testing.B, in *evaluator.Input) string {
	vars := map[string]any{}
	act := map[string]any{"vm": &in.VM, "interface": &in.Interface, "network": &in.Network,
		"ipAddress": &in.IPAddress, "holders": &in.Holders, "namespaceObject": &in.Namespace,
		"change": &in.Change, "variables": vars}
	for _, name := range p.names {
		vars[name] = eval(b, p.variables[name], act)
	}
	alloc := eval(b, p.allocation, act).(string)
	act["allocation"] = alloc
	for _, r := range p.skipRules {
		if eval(b, r, act).(bool) {
			b.Fatal("no skip rule should hold")
		}
	}
	_ = eval(b, p.hotplug, act).(bool)
	return alloc
}

func eval(b *testing.B, prog cel.Program, act map[string]any) any {
	v, _, err := prog.Eval(act)
	if err != nil {
		b.Fatal(err)
	}
	return v.Value()
}
