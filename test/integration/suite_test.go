package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/reads"
	"github.com/vmipam/vmipam/test/env"
)

var (
	testEnv *env.Environment
	k8s     client.Client // reads straight from the API server, never a cache
	scheme  *runtime.Scheme
	// standIns runs the SDN stand-in (as the admin) and the virtualization-controller stand-in
	// (as the virtualization controller's ServiceAccount) for the whole suite.
	standIns []*running
	// auditLog is the API server's audit log of every write (auditPolicy).
	auditLog string
)

// auditPolicy logs the metadata of every write anyone makes, so that a spec can prove from the
// API server's side that something wrote nothing.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "vmipam controller (envtest)")
}

var _ = BeforeSuite(func() {
	logger := zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // the dry-run API server (k8s.io/apiserver) logs through klog
	var err error
	dir, err := os.MkdirTemp("", "vmipam-it-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(os.RemoveAll(dir)).To(Succeed()) })
	auditLog = filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "audit-policy.yaml")
	Expect(os.WriteFile(policy, []byte(auditPolicy), 0o600)).To(Succeed())
	testEnv, err = env.Start(env.Options{ControllerManager: true, Dir: dir, APIServerFlags: map[string]string{
		"audit-policy-file": policy, "audit-log-path": auditLog, "audit-log-mode": "blocking", "audit-log-maxsize": "0"}})
	Expect(err).NotTo(HaveOccurred())
	scheme, err = controller.NewScheme()
	Expect(err).NotTo(HaveOccurred())
	k8s, err = client.New(testEnv.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	vmipamConfig = installIdentity(context.Background())
	standIns = startStandIns(context.Background())
	startVMIPAM()
})

var _ = AfterSuite(func() {
	if vmipamMgr != nil {
		stopVMIPAM()
	}
	for _, r := range standIns {
		r.stop()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	// The cache transforms share label and annotation maps between objects (controller/reads,
	// internal/intern); after every spec ran the controller, none may have been written to.
	Expect(reads.SharedMapsIntact()).To(Succeed())
})
