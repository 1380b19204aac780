package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/scheme"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/evaluator"
)

type evaluateOptions struct {
	requestFlags
	namespace   string
	assumeReady bool
}

func newEvaluateCommand(s Streams) *cobra.Command {
	o := &evaluateOptions{}
	cmd := &cobra.Command{
		Use:   "evaluate -f VM.yaml [-p POLICY.yaml]... [-O OBJECTS.yaml]... [-o table|json|yaml]",
		Short: "Evaluate a VirtualMachine offline: what vmipam would decide and do",
		Long: "evaluate answers, without a cluster, what one reconcile of each VirtualMachine in the -f files would\n" +
			"decide and do, with the engine the controller and its dry-run API use. Only the -O objects exist\n" +
			"(networks, pools, IPAddresses, other VMs, launcher pods, the Namespace); the -p policies decide, or,\n" +
			"without -p, the shipped default policies as a fresh cluster has them. Add policies/default.yaml to -p\n" +
			"to keep it beside candidate policies.",
		Example: "  ipamctl evaluate -f samples/30-virtualmachines.yaml -O samples/10-networks.yaml --assume-ready\n" +
			"  ipamctl evaluate -f vm.yaml -p policies/default.yaml -p tenant.yaml -O world.yaml -o yaml",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.Context(), s) },
	}
	o.bind(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "default", "namespace of a VM manifest that names none")
	f.BoolVar(&o.assumeReady, "assume-ready", false,
		"treat networks without a Ready condition as Ready and Static IPAddresses without status as allocated (manifests as written, before SDN saw them)")
	return cmd
}

// bind registers the flags evaluate and dry-run share.
func (f *requestFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "filename", "f", nil, "file or directory with the VirtualMachine(s) to evaluate (- for stdin)")
	fl.StringArrayVarP(&f.policies, "policy", "p", nil, "file or directory of ClusterIPAMPolicies that replace the installed ones (repeatable)")
	fl.StringArrayVarP(&f.objects, "objects", "O", nil, "file or directory of objects to lay over the cluster's state (repeatable)")
	fl.BoolVarP(&f.recursive, "recursive", "R", false, "read the directories of -f, -p and -O with their subdirectories")
	fl.StringVarP(&f.output, "output", "o", outputTable, "output format: table, json, yaml, or for scripts name, jsonpath=TEMPLATE, go-template=TEMPLATE")
	completeOutput(cmd)
}

func (o *evaluateOptions) run(ctx context.Context, s Streams) error {
	in, err := o.load(s.In)
	if err != nil {
		return err
	}
	engine, err := newEngine()
	if err != nil {
		return err
	}
	results := make([]*dryrunv1.Evaluation, 0, len(in.vms))
	for _, vm := range in.vms {
		res, err := o.evaluate(ctx, s.ErrOut, engine, in, vm)
		if err != nil {
			return err
		}
		results = append(results, res)
	}
	return printResults(s.Out, o.output, results)
}

// evaluate answers for one VM as the API server would: an Evaluation in the VM's namespace
// whose status is the answer (its spec, the input, is left out).
func (o *evaluateOptions) evaluate(ctx context.Context, errOut io.Writer, engine *dryrun.Engine, in *input, vm document) (*dryrunv1.Evaluation, error) {
	body, src, err := in.body(vm)
	if err != nil {
		return nil, err
	}
	req, err := engine.Decode(ctx, body, dryrun.DecodeOptions{DefaultNamespace: o.namespace})
	if err != nil {
		return nil, reportInvalid(errOut, src, err)
	}
	if o.assumeReady {
		assumeReady(req.Objects)
	}
	status, err := engine.Evaluate(ctx, nil, nil, req)
	if err != nil {
		return nil, reportInvalid(errOut, src, err)
	}
	return &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: req.VM.Namespace}, Status: *status}, nil
}

// reportInvalid prints every problem of an *dryrun.InvalidError against the file it is in
// and returns errReported; other errors are returned as they are.
func reportInvalid(w io.Writer, src sources, err error) error {
	var inv *dryrun.InvalidError
	if !errors.As(err, &inv) {
		return err
	}
	fmt.Fprintf(w, "%s: invalid input:\n", src.vm)
	for _, e := range inv.Errs {
		fmt.Fprintf(w, "  %s: %s\n", src.locate(e.Field), e.ErrorBody())
	}
	return errReported
}

// newEngine builds the engine with the controller's default limits.
func newEngine() (*dryrun.Engine, error) {
	compiler, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	if err != nil {
		return nil, err
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	return dryrun.NewEngine(compiler, s)
}

// assumeReady plays SDN for manifests written by hand: a network without a Ready condition
// is Ready, and a Static IPAddress without status holds its requested address.
func assumeReady(objs []client.Object) {
	ready := metav1.Condition{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AssumedReady",
		Message: "assumed by ipamctl --assume-ready"}
	for _, o := range objs {
		switch obj := o.(type) {
		case *sdnv1.Network:
			setIfAbsent(&obj.Status.Conditions, ready)
		case *sdnv1.ClusterNetwork:
			setIfAbsent(&obj.Status.Conditions, ready)
		case *sdnv1.IPAddress:
			allocateStatic(obj)
		}
	}
}

func setIfAbsent(conds *[]metav1.Condition, c metav1.Condition) {
	if meta.FindStatusCondition(*conds, c.Type) == nil {
		meta.SetStatusCondition(conds, c)
	}
}

func allocateStatic(ip *sdnv1.IPAddress) {
	if ip.Spec.Type != sdnv1.IPAddressTypeStatic || ip.Spec.Static == nil || ip.Status.Phase != "" || ip.Status.Address != "" {
		return
	}
	ip.Status.Address, ip.Status.Phase = ip.Spec.Static.IP, sdnv1.IPAddressPhaseAllocated
	meta.SetStatusCondition(&ip.Status.Conditions, metav1.Condition{Type: sdnv1.ConditionAllocated,
		Status: metav1.ConditionTrue, Reason: "AssumedAllocated", Message: "assumed by ipamctl --assume-ready"})
}
