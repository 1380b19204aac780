package dryrunserver

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun/apiserver"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/test/env"
)

// The Service the APIService names, as the install manifests would.
const (
	Namespace   = "vmipam-system"
	ServiceName = "vmipam-dryrun"
)

// Server holds what every replica's dry-run API server shares in an environment: the
// serving certificate for the Service's name.
type Server struct {
	env  *env.Environment
	cert env.ServingCert
}

// New issues the serving certificate.
func New(e *env.Environment) (*Server, error) {
	cert, err := e.ServingCert(Namespace, ServiceName)
	if err != nil {
		return nil, fmt.Errorf("dry-run serving certificate: %w", err)
	}
	return &Server{env: e, cert: cert}, nil
}

// CA is the PEM of the CA of the serving certificate (the APIService's caBundle).
func (s *Server) CA() []byte { return s.cert.CA }

// Options returns the options of one replica's dry-run API server: a free loopback port (also
// returned), the serving certificate, delegated authentication and authorization through the
// environment's admin kubeconfig, their requests passing through wrap when it is not nil.
// It waits (up to a minute) until the API server has published its front-proxy
// configuration, which the server reads when it is built.
func (s *Server) Options(ctx context.Context, c client.Client, wrap transport.WrapperFunc) (*apiserver.Options, int32, error) {
	if err := waitFrontProxy(ctx, c); err != nil {
		return nil, 0, err
	}
	o := apiserver.NewOptions()
	listener, port, err := genericoptions.CreateListener("tcp", "127.0.0.1:0", net.ListenConfig{})
	if err != nil {
		return nil, 0, err
	}
	o.SecureServing.Listener, o.SecureServing.BindPort, o.SecureServing.BindAddress = listener, port, net.ParseIP("127.0.0.1")
	o.SecureServing.ServerCert.CertKey.CertFile, o.SecureServing.ServerCert.CertKey.KeyFile = s.cert.CertFile, s.cert.KeyFile
	o.Authentication.RemoteKubeConfigFile = s.env.Kubeconfig
	o.Authorization.RemoteKubeConfigFile = s.env.Kubeconfig
	if wrap != nil {
		o.Authentication.WithCustomRoundTripper(wrap)
		o.Authorization.WithCustomRoundTripper(wrap)
	}
	return o, int32(port), nil
}

// Route points the Service and the APIService at the replica listening on port and waits
// until the API server reports the APIService Available.
func (s *Server) Route(ctx context.Context, c client.Client, port int32) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: port}}}}
	if err := env.ApplyLocalService(ctx, c, svc); err != nil {
		return err
	}
	gv := dryrunv1.SchemeGroupVersion
	return env.RegisterAPIService(ctx, c, gv.Group, gv.Version, Namespace, ServiceName, port, s.cert.CA, time.Minute)
}

// waitFrontProxy waits until kube-system/extension-apiserver-authentication carries the
// front-proxy CA.
func waitFrontProxy(ctx context.Context, c client.Client) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "extension-apiserver-authentication"}, cm); err != nil {
			return false, nil
		}
		return cm.Data["requestheader-client-ca-file"] != "", nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not publish its front-proxy configuration: %w", err)
	}
	return nil
}
