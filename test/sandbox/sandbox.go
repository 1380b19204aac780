package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/policy"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/samples"
	"github.com/vmipam/vmipam/test/dryrunserver"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// Namespace is where the sample VMs live.
const Namespace = "demo"

// Options configure Run.
type Options struct {
	// Once exits after the samples converged instead of running until ctx ends.
	Once bool
	// Dir keeps the kubeconfig and logs; a fresh temporary directory when empty.
	Dir string
	// Timeout bounds each convergence wait.
	Timeout time.Duration
}

// Run starts the control plane, vmipam and the stand-ins, applies the samples, prints the
// table once converged, creates the "later" samples, prints again, and then keeps running
// (printing how to reach the cluster) until ctx ends, or returns at once with Once.
func Run(ctx context.Context, out io.Writer, opts Options) (err error) {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	fmt.Fprintln(out, "Starting kube-apiserver, etcd and kube-controller-manager (garbage collector)...")
	e, err := env.Start(env.Options{ControllerManager: true, Dir: opts.Dir})
	defer func() {
		if e != nil {
			err = errors.Join(err, e.Stop())
		}
	}()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := startManager(ctx, e)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Applying samples/ ...")
	if err := Apply(ctx, c, samples.FS, "*.yaml"); err != nil {
		return err
	}
	if err := showConverged(ctx, out, c, opts.Timeout, "After applying samples/"); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nCreating samples/later/ (IPAddress late-ip): VM late gets its interface hot-plugged, same launcher pod.")
	if err := Apply(ctx, c, samples.FS, "later/*.yaml"); err != nil {
		return err
	}
	if err := showConverged(ctx, out, c, opts.Timeout, "After creating late-ip"); err != nil {
		return err
	}
	if err := installAccess(ctx, c); err != nil {
		return err
	}
	if err := showDryRun(ctx, out, e); err != nil {
		return err
	}
	if err := showEditorDryRun(ctx, out, e.Config, e.Kubeconfig, filepath.Join(e.Dir, "web-evaluation.yaml"), opts.Timeout); err != nil {
		return err
	}
	if opts.Once {
		return nil
	}
	printAccess(out, e)
	<-ctx.Done()
	fmt.Fprintln(out, "Stopping.")
	return nil
}

// startManager runs the vmipam controller (with its dry-run API server, registered with
// the API server) and both stand-ins in one manager and returns a client that reads straight
// from the API server.
func startManager(ctx context.Context, e *env.Environment) (client.Client, error) {
	logFile, err := os.Create(filepath.Join(e.Dir, "controller.log"))
	if err != nil {
		return nil, err
	}
	controller.SetLogger(zap.New(zap.WriteTo(logFile), zap.UseDevMode(true))) // klog too: no client-go lines between the tables
	scheme, err := controller.NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	registry, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	if err != nil {
		return nil, err
	}
	route, err := setupDryRun(ctx, mgr, registry, e, c)
	if err != nil {
		return nil, err
	}
	if err := sdn.New(nil).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := virtualization.New(nil).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
		}
	}()
	return c, route(ctx)
}

// setupDryRun adds the dry-run API server on a free local port, and returns the step that
// registers it with the API server once the manager runs (an APIService, and an ExternalName
// Service for localhost): `kubectl create -f evaluation.yaml` and `ipamctl dry-run` then work
// with the sandbox's admin kubeconfig alone.
func setupDryRun(ctx context.Context, mgr ctrl.Manager, registry *policy.Registry, e *env.Environment, c client.Client) (func(context.Context) error, error) {
	srv, err := dryrunserver.New(e)
	if err != nil {
		return nil, err
	}
	opts, port, err := srv.Options(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	if _, err := controller.SetupDryRun(mgr, registry, opts); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return srv.Route(ctx, c, port) }, nil
}

// The sample dry run: VM web as it would be with the static IPAddress db-ip, which VM db
// holds (files written into the sandbox's directory).
const (
	dryRunVM = `apiVersion: virtualization.deckhouse.io/v1alpha2
kind: VirtualMachine
metadata: {name: web, namespace: demo}
spec:
  runPolicy: AlwaysOn
  networks:
  - {type: Main}
  - {type: ClusterNetwork, name: corp, ipAddressName: db-ip}
  - {type: Network, name: lan}
`
	dryRunEvaluation = `apiVersion: dryrun.ipam.virtualization.deckhouse.io/v1alpha1
kind: Evaluation
metadata: {namespace: demo}
spec:
  vm:
    apiVersion: virtualization.deckhouse.io/v1alpha2
    kind: VirtualMachine
    metadata: {name: web}
    spec:
      runPolicy: AlwaysOn
      networks:
      - {type: Main}
      - {type: ClusterNetwork, name: corp, ipAddressName: db-ip}
      - {type: Network, name: lan}
`
)

// showDryRun writes the sample dry run's files and asks the API server with `ipamctl dry-run`
// and the admin kubeconfig, printing its table.
func showDryRun(ctx context.Context, out io.Writer, e *env.Environment) error {
	vmFile, evFile := filepath.Join(e.Dir, "web.yaml"), filepath.Join(e.Dir, "web-evaluation.yaml")
	if err := os.WriteFile(vmFile, []byte(dryRunVM), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(evFile, []byte(dryRunEvaluation), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nDry run through the API server (an Evaluation; nothing is written) — what if web named db-ip, which db holds:\n"+
		"$ ipamctl dry-run -f %s --kubeconfig %s\n", vmFile, e.Kubeconfig)
	var errOut bytes.Buffer
	if code := cli.Main(ctx, "ipamctl", []string{"dry-run", "-f", vmFile, "--kubeconfig", e.Kubeconfig},
		cli.Streams{In: strings.NewReader(""), Out: out, ErrOut: &errOut}); code != 0 {
		return fmt.Errorf("ipamctl dry-run through the API server: exit %d: %s", code, errOut.String())
	}
	return nil
}

// showConverged waits until two snapshots a second apart are equal and nothing is pending,
// then prints the table.
func showConverged(ctx context.Context, out io.Writer, c client.Reader, timeout time.Duration, title string) error {
	deadline := time.Now().Add(timeout)
	var prev []Row
	for {
		rows, states, records, err := Snapshot(ctx, c, Namespace)
		if err == nil && settled(rows, states, records) && reflect.DeepEqual(rows, prev) {
			fmt.Fprintf(out, "\n%s:\n\n", title)
			PrintTable(out, rows, states, records)
			return nil
		}
		prev = rows
		if time.Now().After(deadline) {
			PrintTable(out, rows, states, records)
			return fmt.Errorf("%s: not converged within %s", title, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// settled: every VM has NetworkReady, a launcher pod and a record the virtualization
// controller applied, and no interface waits for SDN.
func settled(rows []Row, states []VMState, records []Record) bool {
	if len(states) == 0 || len(records) != len(states) {
		return false
	}
	for _, r := range records {
		if r.Observed != r.Generation {
			return false
		}
	}
	for _, s := range states {
		if s.NetworkReady == "Unknown" {
			return false
		}
	}
	for _, r := range rows {
		if r.Pod == "" || r.Skipped == string(evaluator.ReasonIPAddressPending) || r.Skipped == virtualization.ReasonWaitingForSDN ||
			(r.Mode == "Auto" || r.Mode == "Static") && r.Address == "" {
			return false
		}
	}
	return true
}

func printAccess(out io.Writer, e *env.Environment) {
	fmt.Fprintf(out, "\nRunning. The cluster is yours until Ctrl-C (which stops everything and, unless --dir\n"+
		"was given, removes %s with its admin kubeconfig and logs):\n"+
		"  export KUBECONFIG=%s\n"+
		"  kubectl get vm,ipaddresses.network.deckhouse.io -n %s\n"+
		"  kubectl get events -n %s\n"+
		"  kubectl get clusteripampolicy default -o yaml\n"+
		"Logs: %s/controller.log, %s/kube-controller-manager.log\n"+
		"Ask what would happen to a VM before applying it (an Evaluation through the API server, nothing is written):\n"+
		"  kubectl create -f %s/web-evaluation.yaml -o yaml        # the answer is in .status\n"+
		"  kubectl --as %s create -f %s/web-evaluation.yaml -o yaml   # as a namespace editor (no trace: it may not list the policies)\n"+
		"  kubectl explain evaluations.status.interfaces.decision\n"+
		"  go run ./cmd/ipamctl dry-run -f %s/web.yaml              # edit it first; or: make build && PATH=$PWD/bin:$PATH kubectl ipam dry-run -f …\n"+
		"  go run ./cmd/ipamctl evaluate -f %s/web.yaml -O samples/10-networks.yaml -O samples/20-ipaddresses.yaml --assume-ready   # offline, same evaluator; only the -O objects exist\n",
		e.Dir, e.Kubeconfig, Namespace, Namespace, e.Dir, e.Dir, e.Dir, Editor, e.Dir, e.Dir, e.Dir)
}
