package policytest_test

import (
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// compilerWith returns a compiler with the limits l (zero fields take the defaults) or fails
// the test.
func compilerWith(t testing.TB, l evaluator.Limits) *evaluator.Compiler {
	t.Helper()
	c, err := evaluator.NewCompiler(l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newCompiler returns a compiler with the default limits or fails the test.
func newCompiler(t testing.TB) *evaluator.Compiler { return compilerWith(t, evaluator.Limits{}) }
