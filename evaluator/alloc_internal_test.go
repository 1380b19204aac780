package evaluator

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// The hot path of a decision allocates only what the evaluation needs: checking an input
// within its bounds allocates nothing (it built a path string for every field and map entry,
// and read the struct tags, on every decision).
func TestCheckingAnInputWithinItsBoundsAllocatesNothing(t *testing.T) {
	in := Input{
		VM: VM{Name: "vm-a", Labels: map[string]string{"app": "web", "tier": "1"},
			Annotations: map[string]string{"note": "x"}},
		Holders: Holders{VMs: []string{"vm-b", "vm-c"}},
	}
	in.normalize()
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	every := c.bounds.Read(map[string]bool{"vm": true, "interface": true, "network": true, "ipAddress": true,
		"holders": true, "namespaceObject": true, "change": true})
	if err := (&cost.Checks{}).Check(&in, every); err != nil {
		t.Fatalf("Checks.Check = %v, want nil", err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = (&cost.Checks{}).Check(&in, every) }); n != 0 {
		t.Errorf("Checks.Check allocates %.0f times per call, want 0", n)
	}
}

// Evaluations reuse idle evaluator goroutines (whose stacks the interpreter has grown)
// instead of starting one per decision.
func TestDecisionsReuseIdleEvaluators(t *testing.T) {
	set := NewSet(nil, compileSpec(t, "p", v1alpha1.ClusterIPAMPolicySpec{Allocation: &v1alpha1.Expression{Expression: "'None'"}}))
	set.Decide(context.Background(), Input{}, Options{})
	before := evaluatorsStarted.Load()
	for range 100 {
		set.Decide(context.Background(), Input{}, Options{})
	}
	// Another test's evaluator may end meanwhile; one started evaluator per decision is the fault.
	if started := evaluatorsStarted.Load() - before; started > 10 {
		t.Errorf("100 decisions one after the other started %d evaluators, want them to reuse an idle one", started)
	}
}

// At most maxIdleEvaluators wait idle; the others end with their evaluation.
func TestIdleEvaluatorsAreBounded(t *testing.T) {
	release := make(chan struct{})
	var wg sync.WaitGroup
	n := maxIdleEvaluators + 8
	wg.Add(n)
	for range n {
		runEvaluation(func() { wg.Done(); <-release })
	}
	wg.Wait() // all n run at once, each on its own evaluator
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for idleEvaluators.Load() != maxIdleEvaluators && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if idle := idleEvaluators.Load(); idle != maxIdleEvaluators {
		t.Errorf("%d evaluators idle after %d finished, want %d", idle, n, maxIdleEvaluators)
	}
}

// Every input field reads as the same CEL value through orderedTypes' getters as through
// cel-go's native-type registry, and a string field costs one allocation (it cost two).
func TestInputFieldsReadAsTheRegistryReadsThem(t *testing.T) {
	env := newExpressionsEnv(t)
	in := Input{
		VM:        VM{Name: "vm-a", Namespace: "ns", UID: "uid", Phase: "Running"},
		Interface: Interface{Index: 3, ID: 300, Type: "Network", Name: "n", IPAddressName: "ip", Spec: InterfaceSpec{ID: 7, Type: "Network", Name: "n"}},
		Network:   Network{Exists: true, Ready: true, Pool: Ref{Kind: "IPAddressPool", Name: "p"}},
		IPAddress: IPAddress{Exists: true, Name: "ip", Allocated: true, Owner: Owner{Name: "vm-a", UID: "uid"}},
		Holders:   Holders{Holder: "vm-b"},
		Namespace: Namespace{Name: "ns"},
		Change:    Change{Kind: ChangeAdd, VMRunning: true, To: ChangeState{Allocation: "Static", IPAddressName: "ip"}},
	}
	objects := map[string]any{}
	v := reflect.ValueOf(&in).Elem()
	var collect func(reflect.Value)
	collect = func(v reflect.Value) {
		objects[celTypeName(v.Type())] = v.Addr().Interface()
		for i := range v.NumField() {
			if f := v.Field(i); f.Kind() == reflect.Struct && f.Type().PkgPath() == v.Type().PkgPath() {
				collect(f)
			}
		}
	}
	for i := range v.NumField() {
		collect(v.Field(i))
	}
	provider := env.CELTypeProvider()
	adapter := env.CELTypeAdapter()
	registry := provider.(orderedTypes).Provider
	getters := inputFieldGetters()
	if len(getters) < 30 {
		t.Fatalf("%d field getters, want every string, bool and int field of the input", len(getters))
	}
	for key := range getters {
		typeName, field := key[:strings.LastIndex(key, ".")], key[strings.LastIndex(key, ".")+1:]
		obj, ok := objects[typeName]
		if !ok {
			t.Fatalf("%s: no object of type %s", key, typeName)
		}
		fast, _ := provider.FindStructFieldType(typeName, field)
		slow, _ := registry.FindStructFieldType(typeName, field)
		got, err1 := fast.GetFrom(obj)
		want, err2 := slow.GetFrom(obj)
		if err1 != nil || err2 != nil || adapter.NativeToValue(got).Equal(adapter.NativeToValue(want)) != types.True {
			t.Errorf("%s = %v (%v), want %v (%v)", key, got, err1, want, err2)
		}
	}
	name, _ := provider.FindStructFieldType("evaluator.VM", "name")
	read := func() { // as the interpreter does: get, then adapt
		v, _ := name.GetFrom(&in.VM)
		_ = adapter.NativeToValue(v)
	}
	if n := testing.AllocsPerRun(100, read); n > 1 {
		t.Errorf("reading vm.name allocates %.0f times, want at most 1", n)
	}
}

// compileSpec compiles a policy of the given name and spec with the default limits, or fails
// the test.
func compileSpec(t *testing.T, name string, spec v1alpha1.ClusterIPAMPolicySpec) *Policy {
	t.Helper()
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	p, errs := c.Compile(&v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, nil)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return p
}

// newExpressionsEnv is the environment for new expressions of a compiler with the default
// limits, for tests that parse, check or evaluate against it directly.
func newExpressionsEnv(t *testing.T) *cel.Env {
	t.Helper()
	c, err := NewCompiler(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.envSet.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	return env
}
