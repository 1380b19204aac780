package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Version is ipamctl's version, stamped at build time by `make build` with
// -ldflags "-X github.com/vmipam/vmipam/cmd/ipamctl/cli.Version=<git describe>"; "dev" otherwise.
var Version = "dev"

// newVersionCommand prints the client's version. The controller's is its `--version` and the
// vmipam_build_info metric (README, "Operating vmipam").
func newVersionCommand(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ipamctl's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(s.Out, "ipamctl %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
