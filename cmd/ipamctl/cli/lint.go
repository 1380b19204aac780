package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func newLintCommand(s Streams) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "lint POLICY.yaml|DIR...",
		Short: "Validate, compile and type-check ClusterIPAMPolicies",
		Long: "lint checks every ClusterIPAMPolicy in the files (a directory: its *.yaml, *.yml and *.json files) as the\n" +
			"admission webhook and the controller would: the CRD schema, unknown fields, then every CEL expression\n" +
			"compiled and type-checked against the declared inputs and cost-estimated. Each problem is printed with\n" +
			"its field path; the exit code is 1 when there is any. Warnings (exit code 0) name a skip rule that\n" +
			"replaces, or is replaced by, a rule of the same name of another policy linted with it or of the shipped\n" +
			"default; a message that looks like CEL (it is shown as typed); and, under failurePolicy Ignore, a map\n" +
			"index that fails on an absent key (the policy would silently be passed over).",
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
	compiler, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	if err != nil {
		return err
	}
	src := sources{policies: sourcesOf(docs)}
	failed, seen := 0, map[string]string{}
	var checked []v1alpha1.ClusterIPAMPolicy
	var at []int // index in docs of each checked policy
	for i, d := range docs {
		p, errs := lintOne(engine, i, d, seen)
		if p != nil && !dryrun.PastSizeBounds(errs) { // its warnings would compile what the bounds keep out
			checked, at = append(checked, *p), append(at, i)
		}
		if len(errs) == 0 {
			fmt.Fprintf(s.Out, "%s: ClusterIPAMPolicy %s: ok\n", d.source, d.name)
			continue
		}
		failed++
		for _, e := range errs {
			fmt.Fprintf(s.Out, "%s: %s\n", src.locate(e.Field), e.ErrorBody())
		}
	}
	for j := range checked {
		for _, w := range warnings(compiler, &checked[j], checked) {
			fmt.Fprintf(s.Out, "%s: warning: %s\n", src.locate(fmt.Sprintf("policies[%d].%s", at[j], w.Field)), w.Message)
		}
	}
	if failed > 0 {
		fmt.Fprintf(s.ErrOut, "%d of %d policies have errors\n", failed, len(docs))
		return errReported
	}
	return nil
}

// lintOne checks the policy document number i and returns it when it could be read; seen
// maps the names so far to their files.
func lintOne(engine *dryrun.Engine, i int, d document, seen map[string]string) (*v1alpha1.ClusterIPAMPolicy, field.ErrorList) {
	path := field.NewPath("policies").Index(i)
	if d.apiVersion == "" || d.kind == "" {
		// A file names its kind, as kubectl requires and `ipamctl evaluate -p` and `ipamctl
		// test` do: lint passed a policy without them that evaluate refused.
		return nil, field.ErrorList{field.Required(path.Child("kind"), "apiVersion and kind are required (ClusterIPAMPolicy "+
			v1alpha1.GroupVersion.String()+")")}
	}
	p, errs := engine.CheckPolicy(path, d.json)
	if p == nil {
		return nil, errs
	}
	if other, dup := seen[p.Name]; dup {
		errs = append(errs, field.Duplicate(path.Child("metadata", "name"), p.Name+", also in "+other))
	}
	seen[p.Name] = d.source
	return p, errs
}

// warnings are p's own lint warnings and the skip rules it replaces or that replace it among
// all (the policies linted together, the shipped default last). They never fail lint.
func warnings(c *evaluator.Compiler, p *v1alpha1.ClusterIPAMPolicy, all []v1alpha1.ClusterIPAMPolicy) []evaluator.Warning {
	return append(c.Lint(p), evaluator.ReplacedRules(p, all)...)
}
