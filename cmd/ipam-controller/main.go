// Command ipam-controller runs vmipam: the ClusterIPAMPolicy and VirtualMachine reconcilers.
// It is wiring only; the behaviour lives in package controller.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/dryrun/apiserver"
	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/controller/reads"
	"github.com/vmipam/vmipam/controller/shard"
	policywebhook "github.com/vmipam/vmipam/controller/webhook"
	"github.com/vmipam/vmipam/evaluator"
)

// options are the command-line settings.
type options struct {
	webhookPort            int
	webhookCertDir         string
	metricsAddr, probeAddr string
	pprofAddr              string
	leaderElect            bool
	leaderElectNamespace   string
	leaderElectID          string
	namespaces             []string
	qps                    float32
	burst                  int
	zap                    zap.Options
	dryRun                 *apiserver.Options
	operation              operation
	certs                  certOptions
}

func main() {
	o := options{dryRun: apiserver.NewOptions(), zap: controller.LogOptions()}
	o.dryRun.Version = version
	cmd := &cobra.Command{
		Use:           "ipam-controller",
		Version:       version,
		Short:         "Policy-driven IPAM for the additional network interfaces of VirtualMachines",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true, // main prints the error once
		RunE:          func(cmd *cobra.Command, _ []string) error { return run(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint, HTTPS unless --metrics-secure=false (\"0\" disables it)")
	o.operation.bind(f)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of the Go profiler's /debug/pprof endpoints, for finding where time and memory go (\"0\" disables it)")
	f.IntVar(&o.webhookPort, "webhook-port", 9443, "port of the ClusterIPAMPolicy validating webhook (0 disables it)")
	f.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "directory holding tls.crt and tls.key for the webhook (default <tmp>/k8s-webhook-server/serving-certs)")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding the leader lease (for more than one replica)")
	f.StringVar(&o.leaderElectNamespace, "leader-elect-namespace", "", "namespace of the leader lease (default: the pod's namespace; required outside a cluster with --leader-elect)")
	f.StringVar(&o.leaderElectID, "leader-elect-id", "vmipam-controller.ipam.virtualization.deckhouse.io", "name of the leader lease; each shard (--namespaces) needs its own")
	f.StringSliceVar(&o.namespaces, "namespaces", nil, "run as a shard: reconcile only the VMs of these namespaces (comma-separated), caching nothing namespaced elsewhere; default all (docs/SCALING.md)")
	f.Float32Var(&o.qps, "kube-api-qps", 100, "client-side rate limit of API requests per second, per resource kind (controller-runtime keeps one token bucket per kind); 1,000 new VMs with two pooled networks need 2,000 IPAddress creates and 1,000 record creates")
	f.IntVar(&o.burst, "kube-api-burst", 200, "client-side burst of API requests")
	// The dry-run API server (aggregated API dryrun.ipam.virtualization.deckhouse.io): the
	// library's --secure-port (0 disables it), --tls-cert-file, --authentication-kubeconfig, …
	o.dryRun.AddFlags(f)
	o.certs.bindFlags(f)
	goflags := flag.NewFlagSet("", flag.ExitOnError)
	o.zap.BindFlags(goflags)
	f.AddGoFlagSet(goflags)
	if kc := flag.CommandLine.Lookup("kubeconfig"); kc != nil {
		f.AddGoFlag(kc) // registered by controller-runtime; ctrl.GetConfig reads it
	}
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ipam-controller:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if version != "dev" { // unstamped: vmipam_build_info falls back to what Go recorded
		metrics.SetBuildInfo(version, "") // the same string as --version
	}
	controller.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	ctx := ctrl.SetupSignalHandler()
	if err := startCertRotation(ctx, cfg, o.certs); err != nil {
		return err
	}
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	mgrOpts := ctrl.Options{
		Scheme: scheme, Cache: reads.CacheOptions(), NewCache: reads.NewCache,
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		LeaderElection:         o.leaderElect, LeaderElectionID: o.leaderElectID,
		LeaderElectionNamespace: o.leaderElectNamespace,
		// Step down on SIGTERM so that the standby takes over at once, not after the lease.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{Port: o.webhookPort, CertDir: o.webhookCertDir,
			TLSOpts: o.operation.tlsOpts()}),
	}
	if err := shard.LimitToNamespaces(&mgrOpts.Cache, o.namespaces); err != nil {
		return fmt.Errorf("--namespaces: %w", err)
	}
	o.operation.apply(&mgrOpts, o.metricsAddr)
	o.operation.watchCertificates(o.webhookPort, o.webhookCertDir, o.dryRun.SecureServing.ServerCert.CertKey.CertFile)
	if !o.operation.enableHTTP2 { // the dry-run API server too, as the webhook and metrics servers
		o.dryRun.SecureServing.DisableHTTP2Serving = true
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return err
	}
	registry, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	if err != nil {
		return err
	}
	if o.webhookPort != 0 {
		if err := policywebhook.SetupWebhookWithManager(mgr, registry.Compiler()); err != nil {
			return fmt.Errorf("policy webhook: %w", err)
		}
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	if o.dryRun.Enabled() {
		delegateWith(o.dryRun)
		if _, err := controller.SetupDryRun(mgr, registry, o.dryRun); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// delegateWith makes the dry-run API server ask the API server of --kubeconfig (or
// $KUBECONFIG) for delegated authentication and authorization when run outside a cluster
// with a kubeconfig and without --authentication-kubeconfig / --authorization-kubeconfig.
// In a cluster, both default to the pod's ServiceAccount.
func delegateWith(o *apiserver.Options) {
	kubeconfig := os.Getenv("KUBECONFIG")
	if f := flag.CommandLine.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		kubeconfig = f.Value.String()
	}
	if kubeconfig == "" || os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return
	}
	kubeconfig, _, _ = strings.Cut(kubeconfig, string(os.PathListSeparator))
	if o.Authentication.RemoteKubeConfigFile == "" {
		o.Authentication.RemoteKubeConfigFile = kubeconfig
	}
	if o.Authorization.RemoteKubeConfigFile == "" {
		o.Authorization.RemoteKubeConfigFile = kubeconfig
	}
}
