package evaluator

import (
	"reflect"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
)

// LanguageVersion is the Kubernetes CEL environment version policies compile against. It is
// pinned, not taken from k8s.io/apiserver's default (which resolves to one minor below the
// library outside kube-apiserver), so that upgrading the library never changes what a stored
// policy means. Raising it makes the libraries of the new version available to new and edited
// expressions only; unchanged stored expressions keep compiling (StoredExpressions).
var LanguageVersion = version.MajorMinor(1, 37)

// inputVariables maps each CEL variable to the Go type that declares it.
var inputVariables = map[string]reflect.Type{
	"vm":              reflect.TypeFor[VM](),
	"interface":       reflect.TypeFor[Interface](),
	"network":         reflect.TypeFor[Network](),
	"ipAddress":       reflect.TypeFor[IPAddress](),
	"holders":         reflect.TypeFor[Holders](),
	"namespaceObject": reflect.TypeFor[Namespace](),
	"change":          reflect.TypeFor[Change](),
}

// newInputEnvSet extends the Kubernetes base environment (ip, cidr, lists, regex, strings,
// sets, format, quantity, optionals, …) with the typed inputs. Extend is expensive, so this
// runs once per Compiler.
func newInputEnvSet(limits Limits) (*environment.EnvSet, error) {
	var nativeTypes []any
	opts := []cel.EnvOption{}
	for name, t := range inputVariables {
		nativeTypes = append(nativeTypes, t)
		opts = append(opts, cel.Variable(name, cel.ObjectType(celTypeName(t))))
	}
	nativeTypes = append(nativeTypes, ext.ParseStructTag("json"))
	opts = append([]cel.EnvOption{ext.NativeTypes(nativeTypes...), orderedMaps}, opts...)
	return environment.MustBaseEnvSet(LanguageVersion).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        opts,
		ProgramOptions: []cel.ProgramOption{
			cel.CostLimit(limits.PerCallCostLimit),
			cel.InterruptCheckFrequency(limits.CheckFrequency),
		},
	})
}

// celTypeName is the name cel-go's native type provider gives a Go struct type.
func celTypeName(t reflect.Type) string { return "evaluator." + t.Name() }

// sizeEstimator gives the static cost estimator the declared bounds of the inputs (the
// maxSize tags of input.go) by walking an expression's path through the Go types.
type sizeEstimator struct{}

var _ checker.CostEstimator = sizeEstimator{}

// EstimateSize implements checker.CostEstimator from the maxSize tags of input.go.
func (sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) == 0 {
		return nil
	}
	switch path[0] {
	case "variables":
		return variableSize(n)
	case "allocation": // "Auto", "Static" or "None"
		return &checker.SizeEstimate{Min: 0, Max: 8}
	}
	t, ok := inputVariables[path[0]]
	if !ok {
		return nil
	}
	bound, elem := uint64(0), uint64(defaultElemSize)
	for _, step := range path[1:] {
		switch step {
		case "@items", "@values":
			t, bound = t.Elem(), elem
		case "@keys":
			t, bound = t.Key(), defaultKeySize
		default:
			f, found := fieldByJSONName(t, step)
			if !found {
				return nil
			}
			t, bound, elem = f.Type, sizeTag(f, "maxSize"), cmpOr(sizeTag(f, "elemMaxSize"), defaultElemSize)
		}
	}
	switch t.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		if bound == 0 {
			return nil
		}
		return &checker.SizeEstimate{Min: 0, Max: bound}
	}
	return nil
}

// variableSizeBound is the size a policy variable's value is assumed to have at most for the
// static estimate (characters of a string, entries of a list or map): cel-go estimates costs,
// not result sizes, so a variable's size cannot be derived from its expression. The runtime
// limits guard larger values.
const variableSizeBound = 1024

func variableSize(n checker.AstNode) *checker.SizeEstimate {
	path := n.Path()
	if len(path) > 2 {
		return &checker.SizeEstimate{Min: 0, Max: defaultElemSize}
	}
	switch n.Type().Kind() {
	case types.StringKind, types.BytesKind, types.ListKind, types.MapKind:
		return &checker.SizeEstimate{Min: 0, Max: variableSizeBound}
	}
	return nil
}

// EstimateCallCost implements checker.CostEstimator; calls are left to the library.
func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// estimator is the static cost estimator: the Kubernetes library's function costs over our
// declared input sizes, plus result sizes for string() of fixed-size values. cel-go leaves
// those unbounded, which would reject `'nic ' + string(interface.index)` as infinitely
// expensive; the library does not ask its SizeEstimator about calls, hence this wrapper.
type estimator struct{ lib *library.CostEstimator }

var _ checker.CostEstimator = estimator{}

// EstimateSize implements checker.CostEstimator.
func (e estimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	return e.lib.EstimateSize(n)
}

// EstimateCallCost implements checker.CostEstimator.
func (e estimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if function == overloads.TypeConvertString && len(args) == 1 {
		size := e.EstimateSize(args[0]) // string(s) and string(bytes) are as long as their input
		if max, ok := stringSizes[args[0].Type().TypeName()]; ok {
			size = &checker.SizeEstimate{Min: 1, Max: max}
		}
		if size != nil {
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}, ResultSize: size}
		}
	}
	return e.lib.EstimateCallCost(function, overloadID, target, args)
}

// stringSizes bounds the length of string(x) by the type of x.
var stringSizes = map[string]uint64{
	"int": 20, "uint": 20, "double": 32, "bool": 5,
	"google.protobuf.Timestamp": 40, "google.protobuf.Duration": 32,
	"net.IP": 45, "net.CIDR": 49,
}

func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// costEstimator is the static estimator every expression is checked with.
var costEstimator = estimator{lib: &library.CostEstimator{SizeEstimator: sizeEstimator{}}}
