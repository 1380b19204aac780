package cost

import (
	"reflect"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

// testInput is an input of one variable, vm, bounded as the evaluator's.
type testInput struct {
	VM testVM `json:"vm"`
}

type testVM struct {
	Name        string            `json:"name" maxSize:"253"`
	Labels      map[string]string `json:"labels" maxSize:"256"`
	Annotations map[string]string `json:"annotations" maxSize:"256" elemMaxSize:"262144"`
	Holders     []string          `json:"holders" maxSize:"256"`
}

// testConfig is the evaluator's default limits over testInput.
func testConfig() Config {
	return Config{PerCallLimit: 100_000, StaticLimit: 1_000_000, CheckFrequency: 100, ComprehensionRange: 512,
		Input: reflect.TypeFor[testInput](), Variables: "test.Variables"}
}

// testEnv is the Kubernetes base environment of the evaluator's language version with c's
// guards and limits, and `vm` declared.
func testEnv(t testing.TB, c Config) *cel.Env {
	t.Helper()
	base := environment.MustBaseEnvSet(version.MajorMinor(1, 37))
	baseEnv, err := base.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	guards, progOpts, err := c.Options(baseEnv)
	if err != nil {
		t.Fatal(err)
	}
	opts := append([]cel.EnvOption{ext.NativeTypes(reflect.TypeFor[testVM](), ext.ParseStructTag("json")),
		cel.Variable("vm", cel.ObjectType("cost.testVM"))}, guards...)
	set, err := base.Extend(environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: opts, ProgramOptions: progOpts})
	if err != nil {
		t.Fatal(err)
	}
	env, err := set.Env(environment.NewExpressions)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// eval compiles and evaluates src in env on vm, returning its value, cost and error.
func eval(t testing.TB, env *cel.Env, src string, vm testVM) (ref.Val, uint64, error) {
	t.Helper()
	checked, iss := env.Compile(src)
	if iss.Err() != nil {
		t.Fatalf("%s: %v", src, iss.Err())
	}
	prg, err := env.Program(checked)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	act, err := interpreter.NewActivation(map[string]any{"vm": &vm})
	if err != nil {
		t.Fatal(err)
	}
	v, det, err := prg.Eval(act)
	var cost uint64
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	return v, cost, err
}
