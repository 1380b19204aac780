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

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/test/env"
)

var (
	testEnv *env.Environment
	k8s     client.Client // reads straight from the API server, never a cache
	scheme  *runtime.Scheme
	// standIns runs the SDN and VM-runtime stand-ins for the whole suite.
	standIns *running
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

	standIns = startManager(setupStandIns)
	vmipamConfig = installIdentity(context.Background())
	startVMIPAM()
})

var _ = AfterSuite(func() {
	if vmipamMgr != nil {
		stopVMIPAM()
	}
	if standIns != nil {
		standIns.stop()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
