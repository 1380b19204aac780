package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/controller/dryrun"
)

func newLintCommand(s Streams) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "lint POLICY.yaml|DIR...",
		Short: "Validate, compile and type-check ClusterIPAMPolicies",
		Long: "lint checks every ClusterIPAMPolicy in the files (a directory: its *.yaml, *.yml and *.json files) as the\n" +
			"admission webhook and the controller would: the CRD schema, unknown fields, then every CEL expression\n" +
			"compiled and type-checked against the declared inputs and cost-estimated. Each problem is printed with\n" +
			"its field path; the exit code is 1 when there is any.",
		Example: "  ipamctl lint policies/default.yaml samples/policies/",
		Args:    minArgs(1, "policy file or directory"),
		RunE:    func(_ *cobra.Command, args []string) error { return lint(s, args, recursive) },
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "read the directories with their subdirectories")
	return cmd
}

func lint(s Streams, paths []string, recursive bool) error {
	docs, err := readDocuments(paths, recursive, s.In)
	if err != nil {
		return err
	}
	if len(docs) == 0 {
		// An empty file or folder passing would hide a wrong path in an admin's CI.
		return fmt.Errorf("no policy documents found in %s", strings.Join(paths, ", "))
	}
	engine, err := newEngine()
	if err != nil {
		return err
	}
	src := sources{policies: sourcesOf(docs)}
	failed, seen := 0, map[string]string{}
	for i, d := range docs {
		errs := lintOne(engine, i, d, seen)
		if len(errs) == 0 {
			fmt.Fprintf(s.Out, "%s: ClusterIPAMPolicy %s: ok\n", d.source, d.name)
			continue
		}
		failed++
		for _, e := range errs {
			fmt.Fprintf(s.Out, "%s: %s\n", src.locate(e.Field), e.ErrorBody())
		}
	}
	if failed > 0 {
		fmt.Fprintf(s.ErrOut, "%d of %d policies have errors\n", failed, len(docs))
		return errReported
	}
	return nil
}

// lintOne checks the policy document number i; seen maps the names so far to their files.
func lintOne(engine *dryrun.Engine, i int, d document, seen map[string]string) field.ErrorList {
	path := field.NewPath("policies").Index(i)
	p, errs := engine.CheckPolicy(path, d.json)
	if p == nil {
		return errs
	}
	if other, dup := seen[p.Name]; dup {
		errs = append(errs, field.Duplicate(path.Child("metadata", "name"), p.Name+", also in "+other))
	}
	seen[p.Name] = d.source
	return errs
}
