package monitoring

import (
	"context"
	"net"
	"strconv"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
)

var (
	testEnv *env.Environment
	k8s     client.Client // reads straight from the API server
	cs      kubernetes.Interface
	// metricsURL is the vmipam manager's metrics endpoint.
	metricsURL string
	stop       context.CancelFunc
	stopped    chan struct{}
)

func TestMonitoring(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "vmipam monitoring (envtest)")
}

var _ = BeforeSuite(func() {
	controller.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	testEnv, err = env.Start(env.Options{})
	Expect(err).NotTo(HaveOccurred())
	scheme, err := controller.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(testEnv.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	cs, err = kubernetes.NewForConfig(testEnv.Config)
	Expect(err).NotTo(HaveOccurred())
	startManager(scheme)
})

var _ = AfterSuite(func() {
	if stop != nil {
		stop()
		<-stopped
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startManager runs vmipam with the production metrics server (secure, self-signed
// certificate) on a free local port, and the SDN stand-in.
func startManager(scheme *runtime.Scheme) {
	addr := freeAddr()
	metricsURL = "https://" + addr + "/metrics"
	mgr, err := ctrl.NewManager(testEnv.Config, ctrl.Options{Scheme: scheme, Cache: sim.CacheOptions(),
		Metrics: metrics.ServerOptions{BindAddress: addr, Secure: true}.Server()})
	Expect(err).NotTo(HaveOccurred())
	var ctx context.Context
	ctx, stop = context.WithCancel(context.Background())
	_, err = controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	Expect(err).NotTo(HaveOccurred())
	Expect(sdn.New(nil).SetupWithManager(mgr)).To(Succeed())
	stopped = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(stopped)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
}

// freeAddr is a local address nothing listens on right now.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
