package cost

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// decorate wraps the calls the interpreter plans that need a check first: `==`, `!=` and `in`
// in checkedOperator (deep.go), list `+` in flatAdd (concat.go), a guarded singleton-bound
// function's in singletonCall (guards.go). Every wrapper keeps the node a call: cel-go's cost
// tracker charges a node by its kind.
func (c Config) decorate(i interpreter.InterpretableV2, singletons map[string]singleton) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok {
		return i, nil
	}
	if s, ok := singletons[call.Function()]; ok {
		call = &singletonCall{InterpretableCall: call, singleton: s}
	}
	if len(call.Args()) == 2 {
		switch call.Function() {
		case operators.Equals, operators.NotEquals, operators.In:
			call = &checkedOperator{InterpretableCall: call, limit: c.PerCallLimit}
		case operators.Add:
			call = &flatAdd{InterpretableCall: call}
		}
	}
	return call, nil
}

// Interruptible is the program option that checks the evaluation's context before every call,
// every CheckFrequency checks, as cel-go checks it between comprehension iterations: an
// expression of many calls stops within one call of its deadline. It takes effect under
// ContextEval, which sets the context up (an expression of a few calls runs without).
var Interruptible = cel.CustomDecoratorV2(func(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	if call, ok := i.(interpreter.InterpretableCall); ok {
		return &interruptible{call}, nil
	}
	return i, nil
})

// interruptible is a call that is not made once the evaluation was interrupted: the frame's
// context is checked, every CheckFrequency checks, before it runs. cel-go checks it only
// between comprehension iterations, so an expression of thousands of calls without one ran
// on past the deadline. A call itself is not interrupted: the guards bound its work.
type interruptible struct {
	interpreter.InterpretableCall
}

// Exec implements interpreter.InterpretableV2.
func (c *interruptible) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	if frame.CheckInterrupt() {
		return types.WrapErr(interpreter.InterruptError{})
	}
	return c.InterpretableCall.Exec(frame)
}

// Eval implements interpreter.Interpretable.
func (c *interruptible) Eval(act interpreter.Activation) ref.Val {
	return c.Exec(interpreter.AsFrame(act))
}

// RangeError is the error of a comprehension range v with more elements (entries) than
// ComprehensionRange, nil for one within. cel-go's cost tracker keeps a stack of the values it
// observes that grows with a comprehension's iterations and searches it on most steps, so a
// comprehension's work grows with the square of its iterations while it is charged linearly.
func (c Config) RangeError(v ref.Val) ref.Val {
	if n := listSize(v); n > c.ComprehensionRange {
		return types.WrapErr(fmt.Errorf("a comprehension over %d elements, at most %d: iterate over fewer, "+
			"or split the work", n, c.ComprehensionRange))
	}
	return nil
}
