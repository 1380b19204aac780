package evaluator_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vmipam/vmipam/policies"
)

// repoRoot is the module root, relative to this package's directory (where go test runs).
const repoRoot = ".."

// TestEveryShippedPolicyCompiles compiles every policy file of policies/ and
// samples/policies/ as a new policy (the strictest environment, as the webhook would).
func TestEveryShippedPolicyCompiles(t *testing.T) {
	c := newCompiler(t)
	for _, dir := range []string{"policies", "samples/policies"} {
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no policy files (%v)", dir, err)
		}
		for _, f := range files {
			t.Run(filepath.ToSlash(f[len(repoRoot)+1:]), func(t *testing.T) {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				docs, err := policies.Decode(data)
				if err != nil || len(docs) == 0 {
					t.Fatalf("Decode: %d policies, %v", len(docs), err)
				}
				for i := range docs {
					if _, errs := c.Compile(&docs[i], nil); len(errs) > 0 {
						t.Errorf("policy %s: %v", docs[i].Name, errs.ToAggregate())
					}
				}
			})
		}
	}
}
