package integration

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/vmruntime"
)

var (
	testEnv *env.Environment
	k8s     client.Client // reads straight from the API server, never a cache
	scheme  *runtime.Scheme
	cancel  context.CancelFunc
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "vmipam controller (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, err = env.Start(env.Options{ControllerManager: true})
	Expect(err).NotTo(HaveOccurred())
	scheme, err = controller.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(testEnv.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{Scheme: scheme,
		Cache: controller.CacheOptions(), Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	_, err = controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	Expect(err).NotTo(HaveOccurred())
	Expect(sdn.New(nil).SetupWithManager(mgr)).To(Succeed())
	Expect(vmruntime.New(nil).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
