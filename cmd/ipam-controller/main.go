// Command ipam-controller runs vmipam: the ClusterIPAMPolicy and VirtualMachine reconcilers.
// It is wiring only; the behaviour lives in package controller.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/evaluator"
)

// options are the command-line settings.
type options struct {
	metricsAddr, probeAddr string
	leaderElect            bool
	qps                    float32
	burst                  int
	zap                    zap.Options
}

func main() {
	var o options
	cmd := &cobra.Command{
		Use:          "ipam-controller",
		Short:        "Policy-driven IPAM for the additional network interfaces of VirtualMachines",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE:         func(cmd *cobra.Command, _ []string) error { return run(o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (\"0\" disables it)")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "run only while holding the leader lease (for more than one replica)")
	f.Float32Var(&o.qps, "kube-api-qps", 50, "client-side rate limit of API requests per second")
	f.IntVar(&o.burst, "kube-api-burst", 100, "client-side burst of API requests")
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
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	scheme, err := controller.NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Cache: controller.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress: o.probeAddr,
		LeaderElection:         o.leaderElect, LeaderElectionID: "vmipam-controller.ipam.virtualization.deckhouse.io",
	})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	if _, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
