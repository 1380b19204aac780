package integration

import (
	"context"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/vmruntime"
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
	return startManagerAs(testEnv.Config, setup)
}

// startManagerAs starts a manager authenticated by cfg. Controller names must be unique per
// process, so every manager skips the name check.
func startManagerAs(cfg *rest.Config, setup func(ctx context.Context, mgr ctrl.Manager) error) *running {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme,
		Cache: controller.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptrTrue()}})
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

// setupStandIns runs the SDN and VM-runtime stand-ins.
func setupStandIns(_ context.Context, mgr ctrl.Manager) error {
	if err := sdn.New(nil).SetupWithManager(mgr); err != nil {
		return err
	}
	return vmruntime.New(nil).SetupWithManager(mgr)
}

// startVMIPAM (re)starts the vmipam controller of the suite, as the chart's ServiceAccount.
func startVMIPAM() {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	vmipamMgr = startManagerAs(vmipamConfig, setupVMIPAM)
}

// stopVMIPAM stops the vmipam controller of the suite; the stand-ins keep running.
func stopVMIPAM() {
	mgrMu.Lock()
	defer mgrMu.Unlock()
	vmipamMgr.stop()
}
