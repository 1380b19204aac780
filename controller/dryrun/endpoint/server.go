package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/controller/dryrun"
)

// Options configure the Server. Zero fields take the defaults documented with each.
type Options struct {
	// BindAddress is the HTTPS listener's host:port (default ":8443"; port 0 picks a free one).
	BindAddress string
	// CertFile and KeyFile are the PEM serving certificate and key, reloaded when they change.
	// When both are empty, a self-signed certificate is generated at start-up (a warning is
	// logged): clients must then trust ServingCertPEM or skip verification.
	CertFile, KeyFile string
	// ClientCAFile, when set, also authenticates clients by certificates signed by this CA
	// (user from CN, groups from O), e.g. the cluster's client CA for kubeconfigs with
	// client certificates.
	ClientCAFile string
	// MaxBodyBytes bounds a request body (default dryrun.MaxBodyBytes, 3 MiB).
	MaxBodyBytes int64
	// Timeout bounds one answer (default 10 s).
	Timeout time.Duration
	// MaxInFlight bounds the evaluations that run at once (default DefaultMaxInFlight); more
	// get 429 Too Many Requests with Retry-After.
	MaxInFlight int
	// AuthCacheTTL is how long TokenReview answers and SubjectAccessReview allows are
	// cached (default 10 s); DenyCacheTTL the same for denials (default 5 s).
	AuthCacheTTL, DenyCacheTTL time.Duration
	// Logger receives the Server's messages, the handler's (through the request context) and
	// net/http's own, such as TLS handshake errors, at V(1) (default: the controller's logger
	// named "dryrun").
	Logger logr.Logger
}

func (o Options) withDefaults() Options {
	if o.BindAddress == "" {
		o.BindAddress = ":8443"
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = dryrun.MaxBodyBytes
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.AuthCacheTTL <= 0 {
		o.AuthCacheTTL = 10 * time.Second
	}
	if o.DenyCacheTTL <= 0 {
		o.DenyCacheTTL = 5 * time.Second
	}
	if o.Logger.GetSink() == nil {
		o.Logger = ctrl.Log.WithName("dryrun")
	}
	return o
}

// reviewBackoff retries TokenReviews and SubjectAccessReviews that fail to reach the API server.
var reviewBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 4}

// Server serves the dry-run API over HTTPS. It is a manager.Runnable that runs on every
// replica (it needs no leadership: it writes nothing).
type Server struct {
	handler  *Handler
	listener net.Listener
	tls      *tls.Config
	opts     Options
	certPEM  []byte
	watcher  *certwatcher.CertWatcher
	clientCA *dynamiccertificates.DynamicFileCAContent
	serving  atomic.Bool
}

var (
	_ manager.Runnable               = (*Server)(nil)
	_ manager.LeaderElectionRunnable = (*Server)(nil)
)

// New builds the Server and binds its listener: authentication and authorization delegate
// to the API server of cfg, answers come from engine over reader (only read) with the
// installed policies of policies.
func New(cfg *rest.Config, reader client.Reader, policies PolicySource, engine *dryrun.Engine, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	s := &Server{opts: opts}
	if err := s.setupTLS(); err != nil {
		return nil, err
	}
	authn, authz, err := s.delegation(cfg)
	if err != nil {
		return nil, err
	}
	s.handler = &Handler{Engine: engine, Reader: reader, Policies: policies, Authenticator: authn,
		Authorizer: authz, MaxBodyBytes: opts.MaxBodyBytes, Timeout: opts.Timeout, InFlight: NewInFlight(opts.MaxInFlight)}
	if s.listener, err = net.Listen("tcp", opts.BindAddress); err != nil {
		return nil, fmt.Errorf("dry-run endpoint: listening on %s: %w", opts.BindAddress, err)
	}
	return s, nil
}

// delegation builds the authenticator and authorizer that ask the API server.
func (s *Server) delegation(cfg *rest.Config) (authenticator.Request, authorizer.Authorizer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("dry-run endpoint: API client: %w", err)
	}
	authnCfg := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient: cs.AuthenticationV1(), TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff: &reviewBackoff, CacheTTL: s.opts.AuthCacheTTL,
	}
	if s.clientCA != nil {
		authnCfg.ClientCertificateCAContentProvider = s.clientCA
	}
	authn, _, err := authnCfg.New()
	if err != nil {
		return nil, nil, fmt.Errorf("dry-run endpoint: authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL: s.opts.AuthCacheTTL, DenyCacheTTL: s.opts.DenyCacheTTL, WebhookRetryBackoff: &reviewBackoff,
	}.New()
	if err != nil {
		return nil, nil, fmt.Errorf("dry-run endpoint: authorizer: %w", err)
	}
	return authn, authz, nil
}

// setupTLS loads the serving certificate (or generates one) and the client CA.
func (s *Server) setupTLS() error {
	s.tls = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	switch {
	case s.opts.CertFile != "" || s.opts.KeyFile != "":
		w, err := certwatcher.New(s.opts.CertFile, s.opts.KeyFile)
		if err != nil {
			return fmt.Errorf("dry-run endpoint: serving certificate: %w", err)
		}
		s.watcher, s.tls.GetCertificate = w, w.GetCertificate
		if s.certPEM, err = os.ReadFile(s.opts.CertFile); err != nil {
			return fmt.Errorf("dry-run endpoint: serving certificate: %w", err)
		}
	default:
		if err := s.selfSigned(); err != nil {
			return err
		}
	}
	if s.opts.ClientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("dry-run client CA", s.opts.ClientCAFile)
		if err != nil {
			return fmt.Errorf("dry-run endpoint: client CA: %w", err)
		}
		s.clientCA, s.tls.ClientAuth = ca, tls.RequestClientCert
	}
	return nil
}

// selfSigned generates a serving certificate for this host, localhost and the loopback
// addresses, signed by a CA generated with it.
func (s *Server) selfSigned() error {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
		[]string{"localhost"})
	if err != nil {
		return fmt.Errorf("dry-run endpoint: generating a self-signed certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("dry-run endpoint: self-signed certificate: %w", err)
	}
	s.certPEM = certPEM
	s.tls.Certificates = []tls.Certificate{pair}
	s.opts.Logger.Info("WARNING: no serving certificate given (--dry-run-cert-file, --dry-run-key-file): serving the dry-run endpoint "+
		"with a self-signed certificate that clients cannot verify unless they trust it explicitly", "host", host)
	return nil
}

// Addr is the address the Server listens on (useful with port 0).
func (s *Server) Addr() string { return s.listener.Addr().String() }

// ServingCertPEM is the serving certificate chain in PEM, to be trusted by clients of a
// self-signed endpoint.
func (s *Server) ServingCertPEM() []byte { return s.certPEM }

// Handler returns the dry-run handler (for tests and for mounting elsewhere).
func (s *Server) Handler() *Handler { return s.handler }

// httpErrorLog routes net/http's own messages (TLS handshake errors, …) into the
// controller's log at V(1) instead of the process's standard error: a probe or a client that
// does not trust the certificate is not worth more.
type httpErrorLog struct{ log logr.Logger }

// Write logs one message of net/http's log.Logger.
func (l httpErrorLog) Write(p []byte) (int, error) {
	l.log.V(1).Info("HTTP server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}

// Start serves until ctx ends, then shuts down gracefully.
func (s *Server) Start(ctx context.Context) error {
	if s.watcher != nil {
		go func() {
			if err := s.watcher.Start(ctx); err != nil {
				s.opts.Logger.Error(err, "Watching the serving certificate failed")
			}
		}()
	}
	if s.clientCA != nil {
		go s.clientCA.Run(ctx, 1)
	}
	srv := &http.Server{Handler: s.mux(), TLSConfig: s.tls, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: s.opts.Timeout + 20*time.Second, WriteTimeout: s.opts.Timeout + 10*time.Second,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 1 << 20, ErrorLog: stdlog.New(httpErrorLog{log: s.opts.Logger}, "", 0),
		BaseContext: func(net.Listener) context.Context { return ctrl.LoggerInto(context.Background(), s.opts.Logger) }}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(s.listener, "", "") }()
	s.serving.Store(true)
	s.opts.Logger.Info("Serving the dry-run endpoint", "address", "https://"+s.Addr()+dryrun.Path)
	select {
	case err := <-errc:
		s.serving.Store(false)
		return fmt.Errorf("dry-run endpoint: %w", err)
	case <-ctx.Done():
	}
	s.serving.Store(false)
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dry-run endpoint: shutting down: %w", err)
	}
	return nil
}

// NeedLeaderElection is false: every replica answers dry runs.
func (s *Server) NeedLeaderElection() bool { return false }

func (s *Server) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(dryrun.Path, s.handler)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.ReadyCheck(r); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// ReadyCheck is a healthz.Checker: ready once the Server serves and the installed policies
// are loaded.
func (s *Server) ReadyCheck(_ *http.Request) error {
	if !s.serving.Load() {
		return errors.New("the dry-run endpoint is not serving yet")
	}
	select {
	case <-s.handler.Policies.Loaded():
		return nil
	default:
		return errors.New("the installed policies are not loaded yet")
	}
}
