// Command ipam-sandbox runs vmipam locally against a real kube-apiserver with the SDN and
// virtualization-controller stand-ins and the samples, and prints what happened to every VM interface.
// `make demo` runs it; see test/sandbox.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vmipam/vmipam/test/sandbox"
)

func main() {
	var opts sandbox.Options
	cmd := &cobra.Command{
		Use:   "ipam-sandbox",
		Short: "Run vmipam locally with a real API server, the stand-ins and the samples",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return sandbox.Run(ctx, cmd.OutOrStdout(), opts)
		},
		SilenceUsage: true,
	}
	cmd.Flags().BoolVar(&opts.Once, "once", false, "exit once the samples have converged")
	cmd.Flags().StringVar(&opts.Dir, "dir", "", "directory for the kubeconfig and logs (default: a new temporary directory)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "how long each convergence may take")
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-sandbox:", err)
		os.Exit(1)
	}
}
