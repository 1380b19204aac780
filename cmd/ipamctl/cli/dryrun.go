package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

type dryRunOptions struct {
	requestFlags
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// defaultTimeout applies when --request-timeout is not given.
const defaultTimeout = 30 * time.Second

func newDryRunCommand(s Streams) *cobra.Command {
	o := &dryRunOptions{}
	cmd := &cobra.Command{
		Use:   "dry-run -f VM.yaml [-p POLICY.yaml]... [-O OBJECTS.yaml]... [-o table|json|yaml]",
		Short: "Ask the cluster what vmipam would do to a VirtualMachine (an Evaluation, nothing written)",
		Long: "dry-run creates an Evaluation (dryrun.ipam.virtualization.deckhouse.io/v1alpha1) for each VirtualMachine of the\n" +
			"-f files in its namespace, with optional candidate policies (-p, they replace the installed ones for this\n" +
			"evaluation) and objects (-O, laid over the live state for this evaluation), through the cluster's API server\n" +
			"with the kubeconfig's credentials (--context, --as, any auth method the kubeconfig has). Nothing is written.\n" +
			"The caller needs create on evaluations in the VM's namespace (ClusterRole vmipam:dryrun:evaluator, aggregated\n" +
			"into edit and admin) and with -p the verb evaluate on clusteripampolicies (vmipam:dryrun:policy-evaluator).",
		Example: "  kubectl ipam dry-run -f vm.yaml -n team\n" +
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
	c, namespace, err := o.client(s.ErrOut)
	if err != nil {
		return err
	}
	results := make([]*dryrunv1.Evaluation, 0, len(in.vms))
	for _, vm := range in.vms {
		ev, err := o.ask(ctx, s.ErrOut, c, in, vm, namespace)
		if err != nil {
			return err
		}
		results = append(results, ev)
	}
	return printResults(s.Out, o.output, results)
}

// client is a REST client of the dry-run API at the kubeconfig's API server (with the
// command-line overrides), and the namespace the kubeconfig names.
func (o *dryRunOptions) client(errOut io.Writer) (*rest.RESTClient, string, error) {
	cfg, namespace, err := restConfig(o.kubeconfig, &o.overrides, errOut)
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := dryrunv1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"}) // Status answers
	cfg.GroupVersion, cfg.APIPath = &dryrunv1.SchemeGroupVersion, "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("API client: %w", err)
	}
	return c, namespace, nil
}

// restConfig is the configuration of the kubeconfig (path, or the default rules) with the
// command-line overrides, and the namespace it names. The API server's warnings print to
// errOut as kubectl prints them ("Warning: …", each once), not as klog lines.
func restConfig(kubeconfig string, overrides *clientcmd.ConfigOverrides, errOut io.Writer) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	namespace, _, err := cc.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = defaultTimeout
	}
	cfg.WarningHandlerWithContext = nil
	cfg.WarningHandler = rest.NewWarningWriter(errOut, rest.WarningWriterOptions{Deduplicate: true})
	return cfg, namespace, nil
}

// ask creates the Evaluation of one VM, in the VM's namespace (kubectl's rule: the manifest's
// own, else the kubeconfig's or -n), and returns it with its status.
func (o *dryRunOptions) ask(ctx context.Context, errOut io.Writer, c *rest.RESTClient, in *input, vm document, namespace string) (*dryrunv1.Evaluation, error) {
	ev, src := in.evaluation(vm)
	ev.Namespace = namespace
	var manifest struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if json.Unmarshal(vm.json, &manifest) == nil && manifest.Metadata.Namespace != "" {
		ev.Namespace = manifest.Metadata.Namespace
	}
	answer := &dryrunv1.Evaluation{}
	err := c.Post().Namespace(ev.Namespace).Resource(dryrunv1.Resource).Body(ev).Do(ctx).Into(answer)
	if err != nil {
		return nil, reportStatus(errOut, src, err)
	}
	return answer, nil
}

// reportStatus prints an error answer (its causes pointed back at files) and returns
// errReported; an error that is not the API server's answer is returned with a hint.
func reportStatus(w io.Writer, src sources, err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return err
	}
	st := status.Status()
	if st.Reason == metav1.StatusReasonNotFound { // a create: the path, not an object, is missing
		st.Message += fmt.Sprintf(" (does the API server serve %s? vmipam's APIService must be installed and Available)", dryrunv1.SchemeGroupVersion)
	}
	fmt.Fprintf(w, "%s: the API server answered %d %s: ", src.vm, st.Code, st.Reason)
	if st.Reason != metav1.StatusReasonInvalid || st.Details == nil || len(st.Details.Causes) == 0 {
		fmt.Fprintln(w, st.Message)
		return errReported
	}
	fmt.Fprintln(w, "invalid input:")
	for _, c := range st.Details.Causes {
		fmt.Fprintf(w, "  %s: %s\n", src.locate(c.Field), c.Message)
	}
	return errReported
}
