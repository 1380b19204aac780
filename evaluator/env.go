package evaluator

import (
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
)

// LanguageVersion is the Kubernetes CEL environment version policies compile against. It is
// pinned, not taken from k8s.io/apiserver's default (which resolves to one minor below the
// library outside kube-apiserver), so that upgrading the library never changes what a stored
// policy means. Raising it makes the libraries of the new version available to new and edited
// expressions only; unchanged stored expressions keep compiling (StoredExpressions). Raising
// it, or upgrading cel-go or k8s.io/apiserver, follows the checklist of
// evaluator/internal/cost/doc.go.
var LanguageVersion = version.MajorMinor(1, 37)

// variablesTypeName is the CEL type of a policy's `variables`.
const variablesTypeName = "vmipam.Variables"

// inputVariables maps each CEL variable to the Go type that declares it: the fields of
// Input, by JSON name.
var inputVariables = cost.Config{Input: reflect.TypeFor[Input]()}.Fields()

// costConfig is the cost model's configuration for limits.
func costConfig(l Limits) cost.Config {
	return cost.Config{PerCallLimit: l.PerCallCostLimit, StaticLimit: l.StaticCostLimit, CheckFrequency: l.CheckFrequency,
		ComprehensionRange: l.ComprehensionRange, Input: reflect.TypeFor[Input](), Variables: variablesTypeName}
}

// newInputEnvSet extends the Kubernetes base environment (ip, cidr, lists, regex, strings,
// sets, format, quantity, optionals, …) with the typed inputs, their maps iterating in key
// order (ordered.go), and the cost model's guards and limits. Extend is expensive, so this
// runs once per Compiler.
func newInputEnvSet(limits Limits) (*environment.EnvSet, error) {
	base := environment.MustBaseEnvSet(LanguageVersion)
	baseEnv, err := base.Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	guards, progOpts, err := costConfig(limits).Options(baseEnv)
	if err != nil {
		return nil, err
	}
	var nativeTypes []any
	var vars []cel.EnvOption
	for name, t := range inputVariables {
		nativeTypes = append(nativeTypes, t)
		vars = append(vars, cel.Variable(name, cel.ObjectType(celTypeName(t))))
	}
	nativeTypes = append(nativeTypes, ext.ParseStructTag("json"))
	opts := append([]cel.EnvOption{ext.NativeTypes(nativeTypes...), orderedMaps}, vars...)
	return base.Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        append(opts, guards...),
		ProgramOptions:    progOpts,
	})
}

// celTypeName is the name cel-go's native type provider gives a Go struct type.
func celTypeName(t reflect.Type) string { return "evaluator." + t.Name() }
