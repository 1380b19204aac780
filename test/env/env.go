package env

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/vmipam/vmipam/crds"
)

// Default versions of the control plane; keep in sync with the Makefile.
const (
	K8sVersion  = "1.37.2"
	EtcdVersion = "3.7.3"
)

// Options configure Start.
type Options struct {
	// CRDs to install; nil installs crds.All() (ours and the trimmed third-party ones).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ControllerManager also runs kube-controller-manager (garbage collector, namespace,
	// ClusterRole aggregation).
	ControllerManager bool
	// Dir holds the kubeconfig and logs; a temporary directory, removed by Stop, when empty.
	Dir string
	// APIServerFlags are extra kube-apiserver flags, e.g. audit logging for the scale suite.
	APIServerFlags map[string]string
}

// Environment is a running control plane.
type Environment struct {
	Env *envtest.Environment
	// Config is an admin client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file for kubectl.
	Kubeconfig string
	// Dir holds the kubeconfig and the controller manager's log.
	Dir string
	kcm *exec.Cmd
	// removeDir is set when Stop should delete Dir.
	removeDir bool
}

// AssetsDir is where the control-plane binaries are: $KUBEBUILDER_ASSETS, else the cache
// directory `make envtest-bins` writes to.
func AssetsDir() string {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d
	}
	cache := os.Getenv("VMIPAM_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "vmipam")
	}
	return filepath.Join(cache, "k8s-"+K8sVersion+"-etcd-"+EtcdVersion)
}

// Start starts etcd and kube-apiserver — a front proxy for aggregated APIs, with the
// --requestheader-* and --proxy-client-* flags (see RegisterAPIService) —, installs the CRDs
// and, if asked, starts the controller manager. Call Stop when done, also after an error.
func Start(opts Options) (*Environment, error) {
	assets := AssetsDir()
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("control-plane binaries not found in %s: run `make envtest-bins` first: %w", assets, err)
	}
	if opts.CRDs == nil {
		all, err := crds.All()
		if err != nil {
			return nil, err
		}
		opts.CRDs = all
	}
	dir, ownDir := opts.Dir, false
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "vmipam-env-"); err != nil {
			return nil, err
		}
		ownDir = true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	e := &Environment{Dir: dir, removeDir: ownDir, Env: &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: opts.CRDs},
		ErrorIfCRDPathMissing: true,
	}}
	args := e.Env.ControlPlane.GetAPIServer().Configure()
	frontProxy, err := frontProxyFlags(dir)
	if err != nil {
		return e, fmt.Errorf("front-proxy certificates: %w", err)
	}
	for k, v := range frontProxy {
		args.Set(k, v)
	}
	for k, v := range opts.APIServerFlags {
		args.Set(k, v)
	}
	cfg, err := e.Env.Start()
	if err != nil {
		return e, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	e.Config = cfg
	if err := e.writeKubeconfig(); err != nil {
		return e, err
	}
	if opts.ControllerManager {
		if err := e.startControllerManager(); err != nil {
			return e, err
		}
	}
	return e, nil
}

func (e *Environment) writeKubeconfig() error {
	path, _, err := e.AdminUser("vmipam-admin")
	e.Kubeconfig = path
	return err
}

// AdminUser creates a user of that name in system:masters and returns the path of its
// kubeconfig (in Dir) and its client configuration. Distinct users tell clients apart in the
// API server's audit log.
func (e *Environment) AdminUser(name string) (string, *rest.Config, error) {
	user, err := e.Env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", nil, fmt.Errorf("creating user %s: %w", name, err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(e.Dir, name+".kubeconfig")
	if name == "vmipam-admin" {
		path = filepath.Join(e.Dir, "kubeconfig")
	}
	return path, user.Config(), os.WriteFile(path, data, 0o600)
}

// startControllerManager runs kube-controller-manager with only the garbage-collector and
// namespace controllers, which is what vmipam's ownerReferences rely on, and the ClusterRole
// aggregation (the shipped dry-run role is aggregated into admin and edit).
func (e *Environment) startControllerManager() error {
	logFile, err := os.Create(filepath.Join(e.Dir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(e.Env.BinaryAssetsDirectory, "kube-controller-manager"),
		"--kubeconfig="+e.Kubeconfig,
		"--controllers=garbagecollector,namespace,clusterrole-aggregation",
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	return nil
}

// WebhookServerOptions returns where a webhook server must listen for the API server to reach
// the webhooks InstallWebhooks installs: a local host and free port, and the directory of a
// serving certificate (tls.crt, tls.key) the API server trusts. Start prepares them always.
func (e *Environment) WebhookServerOptions() webhook.Options {
	o := e.Env.WebhookInstallOptions
	return webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}
}

// InstallWebhooks creates (or replaces) the configurations, pointing every webhook whose
// clientConfig names a Service path at the local server of WebhookServerOptions and trusting
// its certificate, and waits until the API server has them. The configurations are changed
// in place. Delete them with the client as any object.
func (e *Environment) InstallWebhooks(hooks ...*admissionregistrationv1.ValidatingWebhookConfiguration) error {
	o := e.Env.WebhookInstallOptions // a copy: same host, port, certificate and CA
	o.Paths, o.MutatingWebhooks, o.ValidatingWebhooks = nil, nil, hooks
	if err := o.ModifyWebhookDefinitions(); err != nil {
		return fmt.Errorf("pointing webhooks at the local server: %w", err)
	}
	if err := o.Install(e.Config); err != nil {
		return fmt.Errorf("installing webhooks: %w", err)
	}
	return nil
}

// Stop stops the controller manager, kube-apiserver and etcd.
func (e *Environment) Stop() error {
	var errs []error
	if e.kcm != nil && e.kcm.Process != nil {
		_ = e.kcm.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- e.kcm.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = e.kcm.Process.Kill()
		}
	}
	if e.Env != nil {
		errs = append(errs, e.Env.Stop())
	}
	if e.removeDir {
		errs = append(errs, os.RemoveAll(e.Dir))
	}
	return errors.Join(errs...)
}
