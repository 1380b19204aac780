package policytest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmipam/vmipam/evaluator/policytest"
)

// repoRoot is the module root, relative to this package's directory (where go test runs).
const repoRoot = "../.."

// TestSampleCases runs every suite of samples/cases (docs/POLICY-TESTS.md has the format).
func TestSampleCases(t *testing.T) {
	c := newCompiler(t)
	fsys := os.DirFS(repoRoot)
	files, err := filepath.Glob(filepath.Join(repoRoot, "samples", "cases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no case files (%v)", err)
	}
	for _, f := range files {
		name := filepath.ToSlash(f[len(repoRoot)+1:])
		t.Run(name, func(t *testing.T) {
			suite, err := policytest.Load(fsys, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			results, err := policytest.Run(context.Background(), c, suite)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range results {
				if !r.Passed() {
					t.Errorf("%s\n    decision: %+v", r, r.Decision)
				}
			}
		})
	}
}
