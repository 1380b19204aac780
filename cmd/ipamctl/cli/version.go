package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// Version is ipamctl's version, stamped at build time by `make build` with
// -ldflags "-X github.com/vmipam/vmipam/cmd/ipamctl/cli.Version=<git describe>"; "dev" otherwise.
var Version = "dev"

type versionOptions struct {
	clientOnly bool
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// newVersionCommand prints the client's version and, as `kubectl version` does, the
// server's: the version of the controller serving the dry-run API, which it publishes as the
// info.version of the group's OpenAPI document (the API server publishes its own the same
// way), read through the kubeconfig's API server. The controller's version is also its
// `--version` and the vmipam_build_info metric (docs/OPERATING.md).
func newVersionCommand(s Streams) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version [--client]",
		Short: "Print ipamctl's version and the version of the controller serving the dry-run API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := fmt.Fprintf(s.Out, "ipamctl %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH); err != nil {
				return err
			}
			if o.clientOnly {
				return nil
			}
			server, err := o.serverVersion(s.ErrOut)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(s.Out, "Server: vmipam %s\n", server)
			return err
		},
	}
	cmd.Flags().BoolVar(&o.clientOnly, "client", false, "print only ipamctl's version (no cluster needed)")
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	clientcmd.BindOverrideFlags(&o.overrides, cmd.Flags(), clientcmd.RecommendedConfigOverrideFlags(""))
	return cmd
}

// serverVersion reads info.version of the dry-run API's OpenAPI v3 document.
func (o *versionOptions) serverVersion(errOut io.Writer) (string, error) {
	cfg, _, err := restConfig(o.kubeconfig, &o.overrides, errOut)
	if err != nil {
		return "", err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("API client: %w", err)
	}
	paths, err := dc.OpenAPIV3().Paths()
	if err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	gv, ok := paths["apis/"+dryrunv1.SchemeGroupVersion.String()]
	if !ok {
		return "", errors.New("server version: the cluster does not serve the dry-run API " + dryrunv1.SchemeGroupVersion.String() +
			" (is vmipam installed, and its APIService Available?)")
	}
	data, err := gv.Schema(k8sruntime.ContentTypeJSON)
	if err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	var doc struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || doc.Info.Version == "" {
		return "", fmt.Errorf("server version: the dry-run API's OpenAPI document has no info.version (%v)", err)
	}
	return doc.Info.Version, nil
}
