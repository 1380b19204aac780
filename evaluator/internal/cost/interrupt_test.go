package cost

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/interpreter"
)

// With Interruptible, an expression without a comprehension stops within CheckFrequency (100)
// calls once its context is done; without, cel-go checks the context only between
// comprehension iterations and evaluates all 250 calls.
func TestCallsCheckTheContextWhenInterruptible(t *testing.T) {
	env := testEnv(t, testConfig())
	checked, iss := env.Compile(strings.TrimSuffix(strings.Repeat("vm.name.contains('x') || ", 250), " || "))
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	act, err := interpreter.NewActivation(map[string]any{"vm": &testVM{Name: "vm-a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts        []cel.ProgramOption
		interrupted bool
	}{{[]cel.ProgramOption{Interruptible}, true}, {nil, false}} {
		prg, err := env.Program(checked, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = prg.ContextEval(done, act)
		if interrupted := errors.Is(err, interpreter.InterruptError{}); interrupted != tc.interrupted {
			t.Errorf("with %d options: error %v, want interrupted = %v", len(tc.opts), err, tc.interrupted)
		}
	}
}
