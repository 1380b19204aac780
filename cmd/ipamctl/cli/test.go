package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/evaluator/policytest"
)

type testOptions struct {
	verbose bool
	output  string
}

func newTestCommand(s Streams) *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test DIR|SUITE.yaml...",
		Short: "Run policy test suites: inputs and the decisions expected for them",
		Long: "test runs every policy test suite (apiVersion " + policytest.APIVersion + ", kind " + policytest.Kind + ")\n" +
			"in the files and directories (searched recursively; other YAML files there are skipped): each case's\n" +
			"input is decided by the suite's policies, with the shipped default as the built-in fallback, and\n" +
			"compared with its expectations. Failed cases are printed with one line per difference; the last\n" +
			"line is `N passed, N failed`. The exit code is 1 when a case fails or a suite cannot be run.",
		Example: "  ipamctl test samples/cases\n  kubectl ipam test ci/policy-tests/ -v",
		Args:    minArgs(1, "suite file or directory"),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), s, args) },
	}
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "also list the cases that pass")
	cmd.Flags().StringVarP(&o.output, "output", "o", outputText, "output format: text, or junit (JUnit XML for CI test reports)")
	return cmd
}

// tally counts cases.
type tally struct{ passed, failed, broken int }

func (o *testOptions) run(ctx context.Context, s Streams, args []string) error {
	if err := checkTestOutput(o.output); err != nil {
		return err
	}
	files, err := suiteFiles(args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no policy test suite (kind %s) in %s", policytest.Kind, strings.Join(args, ", "))
	}
	runner, err := newSuiteRunner()
	if err != nil {
		return err
	}
	if o.output == outputJUnit {
		return runJUnit(ctx, s.Out, runner, files)
	}
	var t tally
	for _, f := range files {
		o.runSuite(ctx, s.Out, runner, f, &t)
	}
	fmt.Fprintf(s.Out, "%d passed, %d failed\n", t.passed, t.failed)
	if t.failed > 0 || t.broken > 0 {
		return errReported
	}
	return nil
}

// runSuite runs one suite file and prints what failed (or everything with -v).
func (o *testOptions) runSuite(ctx context.Context, w io.Writer, r suiteRunner, file string, t *tally) {
	results, err := r.runFile(ctx, file)
	if err != nil {
		t.broken++
		fmt.Fprintf(w, "ERROR %s: %s\n", file, strings.TrimPrefix(err.Error(), file+": "))
		return
	}
	failed := 0
	for _, r := range results {
		if !r.Passed() {
			failed++
		}
	}
	t.passed += len(results) - failed
	t.failed += failed
	status := "ok  "
	if failed > 0 {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s %s (%d cases)\n", status, file, len(results))
	for _, r := range results {
		if o.verbose || !r.Passed() {
			fmt.Fprintln(w, "  "+strings.ReplaceAll(r.String(), "\n", "\n  "))
		}
	}
}

// suiteRunner runs suites with the controller's limits, reading their policies as the
// dry-run engine reads a request's (the decoder `ipamctl lint` and `ipamctl evaluate` use).
type suiteRunner struct {
	compiler *evaluator.Compiler
	decode   policytest.Decoder
}

// newSuiteRunner builds a suiteRunner on a dry-run engine of the controller's default limits.
func newSuiteRunner() (suiteRunner, error) {
	engine, err := newEngine()
	if err != nil {
		return suiteRunner{}, err
	}
	return suiteRunner{compiler: engine.Compiler(), decode: engine.DecodePolicies}, nil
}

// runFile loads a suite (policy paths relative to its file) and runs it.
func (r suiteRunner) runFile(ctx context.Context, file string) ([]policytest.Result, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	root := filepath.VolumeName(abs) + string(filepath.Separator)
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	suite, err := policytest.Load(os.DirFS(root), filepath.ToSlash(rel), r.decode)
	if err != nil {
		return nil, unrooted(err, filepath.ToSlash(rel), file)
	}
	return policytest.Run(ctx, r.compiler, suite)
}

// unrooted shows the file as the user named it in an error that names it from the root.
func unrooted(err error, rel, file string) error {
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), rel, file))
}

// suiteFiles expands the arguments: files as given, directories searched recursively for
// YAML files that are suites.
func suiteFiles(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		info, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			out = append(out, a)
			continue
		}
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !isYAML(p) {
				return err
			}
			if ok, err := isSuite(p); ok || err != nil {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func isYAML(p string) bool {
	ext := filepath.Ext(p)
	return ext == ".yaml" || ext == ".yml"
}

// isSuite reads only the identification of a YAML file: a suite has ipamctl's apiVersion or
// the PolicyTest kind. An unreadable file is reported as a suite so that its error shows.
func isSuite(p string) (bool, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return true, err
	}
	first, _, _ := bytes.Cut(data, []byte("\n---"))
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(first, &head); err != nil {
		return false, nil
	}
	// Either half is enough: a suite with a typo in the other half must fail loudly, not be
	// skipped (an admin's CI would go green without running it). The apiVersion's group is
	// ipamctl's own, so no other kind of file carries it.
	return head.APIVersion == policytest.APIVersion || head.Kind == policytest.Kind, nil
}
