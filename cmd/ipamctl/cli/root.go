package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Streams are the command's standard input, output and error.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// errReported is a failure the command has already printed; it only sets the exit code.
var errReported = errors.New("failed")

// usageError is a mistake in the command line (exit code 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// Exit codes of Main.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// CompletionShim is the name under which kubectl (1.26+) runs a plugin's completion: for
// `kubectl ipam <TAB>` it runs kubectl_complete-ipam with the words typed so far. `make build`
// links it to ipamctl, which then answers as cobra's hidden __complete command.
const CompletionShim = "kubectl_complete-ipam"

// Main runs ipamctl with args and returns the exit code. name is how the binary was
// invoked: as kubectl-ipam, help and messages call it `kubectl ipam`; as CompletionShim it
// prints completions.
func Main(ctx context.Context, name string, args []string, s Streams) int {
	if name == CompletionShim {
		name, args = "kubectl-ipam", append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	cmd := NewCommand(name, s)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	display := cmd.DisplayName()
	var usage usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errReported):
		return exitFailure
	case errors.As(err, &usage):
		fmt.Fprintf(s.ErrOut, "%s: %v\nRun '%s --help' for usage.\n", display, err, display)
		return exitUsage
	}
	fmt.Fprintf(s.ErrOut, "%s: %v\n", display, err)
	return exitFailure
}

// NewCommand returns the root command with every subcommand.
func NewCommand(name string, s Streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "ipamctl",
		Short: "Evaluate VirtualMachines against vmipam policies, lint and test policies",
		Long: "ipamctl answers \"what would vmipam do to this VM?\" offline (evaluate) or through the cluster's API\n" +
			"server (dry-run: an Evaluation), and lints and tests ClusterIPAMPolicies for admins' CI.",
		SilenceUsage: true, SilenceErrors: true,
	}
	if name == "kubectl-ipam" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl ipam"}
	}
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newEvaluateCommand(s), newDryRunCommand(s), newLintCommand(s), newTestCommand(s))
	return root
}

// minArgs requires at least n positional arguments, named what in the message.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError{fmt.Errorf("at least %d %s required", n, what)}
		}
		return nil
	}
}

// noArgs refuses positional arguments.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", args[0])}
	}
	return nil
}
