package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vmipam/vmipam/controller/dryrun"
)

type dryRunOptions struct {
	requestFlags
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// maxAnswerBytes bounds how much of an answer dry-run reads.
const maxAnswerBytes = 64 << 20

// defaultTimeout applies when --request-timeout is not given.
const defaultTimeout = 30 * time.Second

func newDryRunCommand(s Streams) *cobra.Command {
	o := &dryRunOptions{}
	cmd := &cobra.Command{
		Use:   "dry-run -f VM.yaml [-p POLICY.yaml]... [-O OBJECTS.yaml]... [-o table|json|yaml] [--server URL]",
		Short: "Ask the controller's dry-run endpoint what it would do to a VirtualMachine",
		Long: "dry-run sends the VirtualMachine(s) of the -f files, with optional candidate policies (-p, they replace\n" +
			"the installed ones for this request) and objects (-O, laid over the live state for this request), to\n" +
			"the controller's dry-run endpoint, authenticated with the kubeconfig's credentials. Nothing is written.\n" +
			"The caller needs create on virtualmachines in the VM's namespace, and with -p create on\n" +
			"clusteripampolicies (ClusterRoles vmipam:dryrun:virtualmachines and vmipam:dryrun:clusteripampolicies).\n" +
			"--server is the endpoint's address (https://<controller>:8443) when it is not reached through the\n" +
			"kubeconfig's server; --certificate-authority or --insecure-skip-tls-verify then apply to it.",
		Example: "  kubectl ipam dry-run -f vm.yaml --server https://127.0.0.1:8443 --certificate-authority dryrun-ca.crt\n" +
			"  ipamctl dry-run -f vm.yaml -p candidate.yaml -o yaml --context prod",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), s) },
	}
	o.bind(cmd)
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	clientcmd.BindOverrideFlags(&o.overrides, cmd.Flags(), clientcmd.RecommendedConfigOverrideFlags(""))
	return cmd
}

func (o *dryRunOptions) run(ctx context.Context, s Streams) error {
	in, err := o.load(s.In)
	if err != nil {
		return err
	}
	cfg, namespace, err := o.clientConfig()
	if err != nil {
		return err
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("building the HTTP client: %w", err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + dryrun.Path
	results := make([]*dryrun.Result, 0, len(in.vms))
	for _, vm := range in.vms {
		res, err := o.ask(ctx, s.ErrOut, client, url, in, withNamespace(vm, namespace))
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	return printResults(s.Out, o.output, results)
}

// clientConfig reads the kubeconfig with the command-line overrides.
func (o *dryRunOptions) clientConfig() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &o.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	// The endpoint authenticates the caller by TokenReview or client certificate and does not
	// honour impersonation headers; accepting --as would make an operator believe they tested
	// someone else's permissions.
	if imp := cfg.Impersonate; imp.UserName != "" || len(imp.Groups) > 0 || imp.UID != "" {
		return nil, "", fmt.Errorf("impersonation (--as, --as-group, --as-uid or the kubeconfig's 'as' fields) is not supported by the dry-run endpoint: ask with the other user's own credentials (--token)")
	}
	namespace, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	return cfg, namespace, nil
}

// withNamespace puts a VM manifest without a namespace into namespace (kubectl's rule).
func withNamespace(vm document, namespace string) document {
	var obj map[string]any
	if err := json.Unmarshal(vm.json, &obj); err != nil {
		return vm // the endpoint reports it
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if ns, _ := md["namespace"].(string); ns != "" {
		return vm
	}
	md["namespace"] = namespace
	if data, err := json.Marshal(obj); err == nil {
		vm.json = data
	}
	return vm
}

// ask posts one request and decodes the answer.
func (o *dryRunOptions) ask(ctx context.Context, errOut io.Writer, client *http.Client, url string, in *input, vm document) (*dryrun.Result, error) {
	body, src, err := in.body(vm)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w (is --server the controller's dry-run endpoint, and its certificate trusted: --certificate-authority or --insecure-skip-tls-verify?)", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, reportStatus(errOut, src, resp.StatusCode, data)
	}
	res := &dryrun.Result{}
	if err := json.Unmarshal(data, res); err != nil || res.Kind != dryrun.KindResult {
		return nil, fmt.Errorf("%s answered something that is not a dry-run result (is it the controller's dry-run endpoint?): %.200s", url, data)
	}
	return res, nil
}

// reportStatus prints an error answer (a metav1.Status, its causes pointed back at files)
// and returns errReported.
func reportStatus(w io.Writer, src sources, code int, data []byte) error {
	st := &metav1.Status{}
	if err := json.Unmarshal(data, st); err != nil || st.Kind != "Status" {
		hint := ""
		if code == http.StatusNotFound {
			hint = " (the dry-run endpoint is served by the controller, not by the API server: pass --server https://<controller address>:8443)"
		}
		return fmt.Errorf("the endpoint answered %d %s: %.200s%s", code, http.StatusText(code), data, hint)
	}
	fmt.Fprintf(w, "%s: the dry-run endpoint answered %d %s: ", src.vm, code, st.Reason)
	if st.Details == nil || len(st.Details.Causes) == 0 {
		fmt.Fprintln(w, st.Message)
		return errReported
	}
	fmt.Fprintln(w, "invalid input:")
	for _, c := range st.Details.Causes {
		fmt.Fprintf(w, "  %s: %s\n", src.locate(c.Field), c.Message)
	}
	return errReported
}
