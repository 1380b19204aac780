// Command ipamctl evaluates VirtualMachines against vmipam's policies, offline or through the
// controller's dry-run endpoint, and lints and tests ClusterIPAMPolicies. Installed as
// kubectl-ipam it is also `kubectl ipam`. It is wiring only; the commands live in package cli.
package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), filepath.Base(os.Args[0]), os.Args[1:], cli.Streams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
}
