package integration

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/reads"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// running is a started manager that can be stopped.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// stop cancels the manager and waits until it has returned.
func (r *running) stop() {
	r.cancel()
	<-r.done
}

var (
	// vmipamMgr is the vmipam controller under test; specs may stop and restart it.
	vmipamMgr *running
	mgrMu     sync.Mutex
)

// startManager starts a manager with the given setup as the admin and returns a handle to
// stop it.
func startManager(setup func(ctx context.Context, mgr ctrl.Manager) error) *running {
	GinkgoHelper()
	return startManagerWith(testEnv.Config, nil, setup)
}

// startManagerAs starts a manager authenticated by cfg.
func startManagerAs(cfg *rest.Config, setup func(ctx context.Context, mgr ctrl.Manager) error) *running {
	GinkgoHelper()
	return startManagerWith(cfg, nil, setup)
}

// startManagerWith starts a manager authenticated by cfg, its client wrapped by wrap (nil: not
// wrapped), its options changed by tune: a spec's way to put a concurrent writer or a failing API call exactly where the
// controller writes. Controller names must be unique per process, so every manager skips the
// name check.
func startManagerWith(cfg *rest.Config, wrap func(client.Client) client.Client, setup func(ctx context.Context, mgr ctrl.Manager) error,
	tune ...func(*ctrl.Options)) *running {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := ctrl.Options{Scheme: scheme,
		Cache: reads.CacheOptions(), NewCache: reads.NewCache, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptrTrue()}}
	for _, t := range tune {
		t(&opts)
	}
	if wrap != nil {
		opts.NewClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.New(cfg, o)
			if err != nil {
				return nil, err
			}
			return wrap(c), nil
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(setup(ctx, mgr)).To(Succeed())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(r.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	return r
}

func ptrTrue() *bool { t := true; return &t }

// setupVMIPAM is the production wiring of the vmipam controller.
func setupVMIPAM(ctx context.Context, mgr ctrl.Manager) error {
	_, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	return err
}

// standInExpectationTTL is how long the virtualization-controller stand-in trusts a pod it
// created or deleted that its cache does not show yet: short, so that a pod created and
// deleted out of its sight costs a spec seconds, not its timeout.
const standInExpectationTTL = 2 * time.Second

// startStandIns starts the SDN stand-in as the admin and the virtualization-controller
// stand-in as the virtualization controller's ServiceAccount — the chart's default
// records.consumers, bound by the chart to the record consumer's role —, so that the records
// admission policy treats it as it treats the real one. Both read more of a launcher pod than
// vmipam's cache keeps (sim.CacheOptions).
func startStandIns(ctx context.Context) []*running {
	GinkgoHelper()
	for _, o := range virtualization.Identity() {
		Expect(client.IgnoreAlreadyExists(k8s.Create(ctx, o))).To(Succeed(), "create %T %s", o, o.GetName())
	}
	vcConfig, _, err := testEnv.ServiceAccount(ctx, virtualization.ServiceAccountNamespace, virtualization.ServiceAccountName)
	Expect(err).NotTo(HaveOccurred())
	standInCache := func(o *ctrl.Options) { o.Cache, o.NewCache = sim.CacheOptions(), nil }
	return []*running{
		startManagerWith(testEnv.Config, nil, setupSDN, standInCache),
		startManagerWith(vcConfig, nil, setupVC, standInCache),
	}
}

// setupSDN runs the SDN stand-in.
func setupSDN(_ context.Context, mgr ctrl.Manager) error { return sdn.New(nil).SetupWithManager(mgr) }

// setupVC runs the virtualization-controller stand-in, reporting its guest in the VM status
// (the Running condition, status.guestOSInfo) as VC does.
func setupVC(_ context.Context, mgr ctrl.Manager) error {
	vc := virtualization.New(nil)
	vc.ReportGuest = true
	vc.ExpectationTTL = standInExpectationTTL
	return vc.SetupWithManager(mgr)
}

// startVMIPAM (re)starts the vmipam controller of the suite, as the chart's ServiceAccount.
func startVMIPAM() {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	vmipamMgr = startManagerAs(vmipamConfig, setupVMIPAM)
}

// swapVMIPAM stops the suite's vmipam controller and runs one whose client is wrapped by wrap
// instead, until the spec ends.
func swapVMIPAM(wrap func(client.Client) client.Client) {
	GinkgoHelper()
	stopVMIPAM()
	mgrMu.Lock()
	defer mgrMu.Unlock()
	swapped := startManagerWith(vmipamConfig, wrap, setupVMIPAM)
	DeferCleanup(func() {
		swapped.stop()
		startVMIPAM()
	})
}

// stopVMIPAM stops the vmipam controller of the suite; the stand-ins keep running.
func stopVMIPAM() {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	vmipamMgr.stop()
}
