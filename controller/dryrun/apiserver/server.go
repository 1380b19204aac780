package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/controller/dryrun"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// Defaults of Options.
const (
	// DefaultPort is the port the dry-run API is served on.
	DefaultPort = 8443
	// DefaultEvaluationTimeout bounds one evaluation.
	DefaultEvaluationTimeout = 10 * time.Second
	// DefaultMaxInFlight is the seats of the dry run: evaluations (creates) read, decoded and
	// answered at once, shared fairly between callers (fairQueue), so that a burst of large
	// dry runs can neither starve the reconciles sharing the process nor grow it past the
	// chart's memory limit. More wait for a seat, in queues of their caller's own.
	DefaultMaxInFlight = 4
)

// Options configure the Server: the library's own serving, delegated authentication and
// authorization options (and flags), and vmipam's limits.
type Options struct {
	// SecureServing is where and with which certificate to serve (--secure-port,
	// --bind-address, --tls-cert-file, --tls-private-key-file, --cert-dir, …). Port 0 turns
	// the dry-run API off. Without a certificate, a self-signed one is generated (clients —
	// the APIService — must then skip verification or trust it).
	SecureServing *genericoptions.SecureServingOptionsWithLoopback
	// Authentication reads the front-proxy CA and header names from
	// kube-system/extension-apiserver-authentication (--authentication-kubeconfig outside a
	// cluster).
	Authentication *genericoptions.DelegatingAuthenticationOptions
	// Authorization asks the API server by SubjectAccessReview (--authorization-kubeconfig
	// outside a cluster).
	Authorization *genericoptions.DelegatingAuthorizationOptions
	// EvaluationTimeout bounds one evaluation (--dry-run-timeout); past it the answer is a 504.
	EvaluationTimeout time.Duration
	// MaxInFlight is the number of seats (--dry-run-max-in-flight, at least 1): evaluations
	// read, decoded and answered at once, for all callers together, shared fairly between
	// them. Each seat may hold a body of up to MaxRequestBytes and what the evaluation makes
	// of it: docs/SCALING.md relates the seats to the chart's memory limit.
	MaxInFlight int
	// Version is the controller's version (its --version), published as info.version of the
	// dry-run API's OpenAPI documents — where the API server publishes its own — for
	// `ipamctl version`. Default "dev".
	Version string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	secure := genericoptions.NewSecureServingOptions()
	secure.BindPort = DefaultPort
	secure.ServerCert.PairName = "dryrun"
	return &Options{
		SecureServing:     secure.WithLoopback(),
		Authentication:    genericoptions.NewDelegatingAuthenticationOptions(),
		Authorization:     genericoptions.NewDelegatingAuthorizationOptions(),
		EvaluationTimeout: DefaultEvaluationTimeout,
		MaxInFlight:       DefaultMaxInFlight,
		Version:           "dev",
	}
}

// AddFlags registers the options' flags: the library's serving, authentication and
// authorization flags under their usual names — except those of the credentials the server
// does not accept (--client-ca-file, token review) —, and --dry-run-timeout and
// --dry-run-max-in-flight.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.SecureServing.AddFlags(fs)
	library := pflag.NewFlagSet("", pflag.ContinueOnError)
	o.Authentication.AddFlags(library)
	o.Authorization.AddFlags(library)
	library.VisitAll(func(f *pflag.Flag) {
		if f.Name != "client-ca-file" && !strings.HasPrefix(f.Name, "authentication-token-webhook") {
			fs.AddFlag(f)
		}
	})
	fs.DurationVar(&o.EvaluationTimeout, "dry-run-timeout", o.EvaluationTimeout, "longest time one dry-run evaluation may take; past it the answer is 504")
	fs.IntVar(&o.MaxInFlight, "dry-run-max-in-flight", o.MaxInFlight, "dry-run evaluations read, decoded and answered at once by this replica, "+
		"for all callers together and shared fairly between them; more wait, unread, in queues of their caller's own, and what cannot wait "+
		"gets 429 Too Many Requests with Retry-After. Each seat holds a body of up to 3 MiB and what it decodes to: "+
		"budget ~75 MiB of the memory limit per seat (docs/SCALING.md)")
}

// Enabled says whether the options serve the dry-run API at all (a port other than 0, or a
// listener given).
func (o *Options) Enabled() bool {
	return o.SecureServing.Listener != nil || o.SecureServing.BindPort > 0
}

// Server is the dry-run API server. It is a manager.Runnable that runs on every replica.
type Server struct {
	generic  *genericapiserver.GenericAPIServer
	policies PolicySource
	serving  atomic.Bool
}

var (
	_ manager.Runnable               = (*Server)(nil)
	_ manager.LeaderElectionRunnable = (*Server)(nil)
)

// New builds the Server: evaluations answered by engine over reader (the manager's cache,
// only read) with the installed policies of policies; apiReader (uncached) reads the
// cluster's CRDs, whose schemas find unknown fields in the manifests of a spec.
func New(o *Options, engine *dryrun.Engine, reader, apiReader client.Reader, policies PolicySource) (*Server, error) {
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	spec, err := loadSpecSchema()
	if err != nil {
		return nil, err
	}
	generic, err := cfg.Complete().New("vmipam-dryrun", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("dry-run API server: %w", err)
	}
	s := &Server{generic: generic, policies: policies}
	storage := &evaluations{engine: engine, reader: reader, policies: policies, authorizer: cfg.Authorization.Authorizer,
		timeout: o.EvaluationTimeout, spec: spec, crds: newClusterSchemas(apiReader)}
	group := genericapiserver.NewDefaultAPIGroupInfo(dryrunv1.GroupName, Scheme, parameterCodec, Codecs)
	group.NegotiatedSerializer = servedSerializers
	group.VersionedResourcesStorageMap[dryrunv1.SchemeGroupVersion.Version] = map[string]rest.Storage{dryrunv1.Resource: storage}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("dry-run API server: installing %s: %w", dryrunv1.SchemeGroupVersion, err)
	}
	if err := generic.AddReadyzChecks(healthz.NamedCheck("policies-loaded", s.policiesLoaded)); err != nil {
		return nil, err
	}
	if err := generic.AddPostStartHook("vmipam-dryrun-serving", func(genericapiserver.PostStartHookContext) error {
		s.serving.Store(true)
		return nil
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// config applies the options to a generic API server configuration.
func (o *Options) config() (*genericapiserver.RecommendedConfig, error) {
	if err := o.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, nil); err != nil {
		return nil, fmt.Errorf("dry-run API server: self-signed certificate: %w", err)
	}
	if errs := append(append(o.SecureServing.Validate(), o.Authentication.Validate()...), o.Authorization.Validate()...); len(errs) > 0 {
		return nil, fmt.Errorf("dry-run API server: %w", errors.Join(errs...))
	}
	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	// Evaluations wait for a seat in the fair queue instead of the library's mutating
	// in-flight limit, which exempts system:masters and refuses at once whoever comes fifth.
	cfg.MaxMutatingRequestsInFlight = 0
	cfg.MaxRequestBodyBytes = MaxRequestBytes
	// An evaluation waits for a seat at most a quarter of the request timeout (15 s), as the
	// library's API Priority and Fairness lets a request wait.
	fair, err := newFairQueue(o.MaxInFlight, cfg.RequestTimeout/4)
	if err != nil {
		return nil, err
	}
	namer := openapinamer.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(definitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "vmipam dry-run", o.Version
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "vmipam dry-run", o.Version
	cfg.OpenAPIV3Config.PostProcessSpec = advertiseFieldValidation
	cfg.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		// The fair queue runs after authentication and authorization (it knows the caller) and
		// before the handler that reads and decodes the body.
		return genericapiserver.DefaultBuildHandlerChain(createOnly(fair.handler(h)), c)
	}
	if err := o.SecureServing.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("dry-run API server: serving: %w", err)
	}
	if err := o.Authentication.ApplyTo(&cfg.Authentication, cfg.SecureServing, cfg.OpenAPIConfig); err != nil {
		return nil, fmt.Errorf("dry-run API server: authentication: %w", err)
	}
	if err := frontProxyOnly(&cfg.Authentication); err != nil {
		return nil, err
	}
	if err := o.Authorization.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("dry-run API server: authorization: %w", err)
	}
	return cfg, nil
}

// frontProxyOnly replaces the library's delegating authenticator, which would also accept
// bearer tokens (by TokenReview) and client certificates, by one that accepts only the
// front proxy's headers and otherwise treats a request as anonymous (allowed only the
// health paths). So a user's credential never reaches vmipam: callers go through the API
// server.
func frontProxyOnly(info *genericapiserver.AuthenticationInfo) error {
	if info.RequestHeaderConfig == nil {
		return errors.New("dry-run API server: no front-proxy configuration (requestheader-client-ca-file) in " +
			"kube-system/extension-apiserver-authentication: the API server must run with the --requestheader-* and --proxy-client-* flags")
	}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:           &apiserverv1.AnonymousAuthConfig{Enabled: true},
		RequestHeaderConfig: info.RequestHeaderConfig,
	}.New()
	if err != nil {
		return fmt.Errorf("dry-run API server: authentication: %w", err)
	}
	info.Authenticator = authn
	return nil
}

// parameterCodec decodes query parameters (CreateOptions) of the group.
var parameterCodec = runtime.NewParameterCodec(Scheme)

// Start serves until ctx ends, then shuts down gracefully.
func (s *Server) Start(ctx context.Context) error {
	defer s.serving.Store(false)
	if err := s.generic.PrepareRun().RunWithContext(ctx); err != nil {
		return fmt.Errorf("dry-run API server: %w", err)
	}
	return nil
}

// NeedLeaderElection is false: every replica answers dry runs.
func (s *Server) NeedLeaderElection() bool { return false }

// ReadyCheck is a healthz.Checker for the manager: ready once the Server serves and the
// installed policies are loaded.
func (s *Server) ReadyCheck(_ *http.Request) error {
	if !s.serving.Load() {
		return errors.New("the dry-run API server is not serving yet")
	}
	return s.policiesLoaded(nil)
}

func (s *Server) policiesLoaded(_ *http.Request) error {
	select {
	case <-s.policies.Loaded():
		return nil
	default:
		return errors.New("the installed policies are not loaded yet")
	}
}
