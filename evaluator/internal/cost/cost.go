package cost

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
)

// Config is what the limits, guards and estimate of one environment are built from.
type Config struct {
	// PerCallLimit stops one expression's evaluation (cel.CostLimit); it also bounds what one
	// guarded call may walk, compare or produce before it runs.
	PerCallLimit uint64
	// StaticLimit refuses an expression whose estimate exceeds it; estimates above
	// PerCallLimit are warned about.
	StaticLimit uint64
	// CheckFrequency is how many comprehension iterations or calls run between two checks of
	// the evaluation's context (its deadline).
	CheckFrequency uint
	// ComprehensionRange bounds the elements one comprehension may iterate over, at run time.
	ComprehensionRange uint64
	// Input is the struct type whose fields are the CEL input variables (by their JSON
	// names); its maxSize and elemMaxSize tags declare their bounds.
	Input reflect.Type
	// Variables is the CEL type name of a policy's `variables`, whose field types the
	// type-depth bound reads.
	Variables string
}

// Options are the environment and program options of the cost model over base, the
// Kubernetes base environment the expressions compile in. The environment options are the
// parser's nesting limit and the guarded overloads, each rebound from base with its check in
// front of the library's implementation. The program options are the run-time bounds: the
// per-call cost limit, the interrupt checks (between comprehension iterations and before
// calls), the comparing operations' pre-walk and charges, flat list concatenation, the
// charges of results the library does not charge, and the guards of functions the library
// binds once for all their overloads (sort()), checked where the call is planned.
func (c Config) Options(base *cel.Env) ([]cel.EnvOption, []cel.ProgramOption, error) {
	guarded, singletons, err := c.guardedOverloads(base)
	if err != nil {
		return nil, nil, err
	}
	deep, err := c.deepOverloads(base)
	if err != nil {
		return nil, nil, err
	}
	env := append(append([]cel.EnvOption{cel.ParserRecursionLimit(MaxNestingDepth)}, guarded...), deep...)
	decorate := func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
		return c.decorate(i, singletons)
	}
	prog := []cel.ProgramOption{
		cel.CostLimit(c.PerCallLimit),
		cel.InterruptCheckFrequency(c.CheckFrequency),
		resultCharges,
		regexOptimizations,
		c.deepCharges(),
		cel.CustomDecoratorV2(decorate),
	}
	return env, prog, nil
}

// maxChars is how many characters one guarded call may produce: ten per unit of the per-call
// limit, what a string of that length is charged to traverse.
func (c Config) maxChars() uint64 { return saturatingMul(c.PerCallLimit, 10) }

// Fields are the CEL input variables: c.Input's fields by JSON name.
func (c Config) Fields() map[string]reflect.Type {
	if m, ok := fieldsOf.Load(c.Input); ok {
		return m.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := range c.Input.NumField() {
		f := c.Input.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out[name] = f.Type
	}
	fieldsOf.Store(c.Input, out)
	return out
}

// fieldsOf caches Fields by input type.
var fieldsOf sync.Map

// addSaturating is a+b, or MaxUint64 when it overflows.
func addSaturating(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// saturatingMul is a*b, or MaxUint64 when it overflows.
func saturatingMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

// truncate is s cut to 64 bytes on a character boundary, "…" marking the cut, for quoting a
// value in an error.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// guardError is the error of a call refused by a guard.
func guardError(function string, err error) error {
	return fmt.Errorf("%s(): argument beyond the bound policies are evaluated with: %w", function, err)
}
