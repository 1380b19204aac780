package endpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/metrics"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// PolicySource is the controller's policy snapshot; policy.Registry implements it.
type PolicySource interface {
	// Set is the current snapshot of the installed policies.
	Set() *evaluator.Set
	// Loaded is closed once every installed policy has been compiled.
	Loaded() <-chan struct{}
}

// Handler answers POST dryrun.Path. Build it with every field set (New does).
type Handler struct {
	Engine *dryrun.Engine
	// Reader is the live state (the manager's cache); it is only read.
	Reader   client.Reader
	Policies PolicySource
	// Authenticator and Authorizer delegate to the API server.
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
	// MaxBodyBytes bounds the request body.
	MaxBodyBytes int64
	// Timeout bounds one answer.
	Timeout time.Duration
	// InFlight, when not nil, bounds the evaluations that run at once: its capacity is the
	// limit (NewInFlight). An authenticated request finding it full gets 429 with Retry-After,
	// so a burst of large dry runs cannot starve the reconciles sharing the process.
	InFlight chan struct{}
}

// DefaultMaxInFlight is the default bound of concurrent dry-run evaluations.
const DefaultMaxInFlight = 4

// NewInFlight returns an InFlight semaphore for n evaluations at once (DefaultMaxInFlight when
// n <= 0).
func NewInFlight(n int) chan struct{} {
	if n <= 0 {
		n = DefaultMaxInFlight
	}
	return make(chan struct{}, n)
}

var _ http.Handler = (*Handler)(nil)

// failure is an answer other than 200: a metav1.Status.
type failure struct {
	code    int
	message string
	causes  error // *dryrun.InvalidError for 400, else nil
}

func (f *failure) Error() string { return f.message }

// ServeHTTP answers one request and counts it by status code.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.Timeout)
	defer cancel()
	res, err := h.serve(ctx, w, r)
	var f *failure
	switch {
	case errors.As(err, &f):
	case err != nil:
		f = h.internal(ctx, err)
	}
	if f != nil {
		metrics.Request(f.code)
		writeStatus(w, r, f)
		return
	}
	metrics.Request(http.StatusOK)
	writeResult(w, r, res)
}

// serve runs the steps of the package documentation in order.
func (h *Handler) serve(ctx context.Context, w http.ResponseWriter, r *http.Request) (*dryrun.Result, error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return nil, &failure{code: http.StatusMethodNotAllowed, message: "only POST is supported"}
	}
	caller, err := h.authenticate(r)
	if err != nil {
		return nil, err
	}
	release, err := h.admit(w)
	if err != nil {
		return nil, err
	}
	defer release()
	data, err := h.readBody(w, r)
	if err != nil {
		return nil, err
	}
	authorize := func(namespace string, withPolicies bool) error {
		return h.authorize(ctx, caller, namespace, withPolicies)
	}
	req, err := h.Engine.Decode(data, dryrun.DecodeOptions{Authorize: authorize})
	var inv *dryrun.InvalidError
	switch {
	case errors.As(err, &inv):
		return nil, &failure{code: http.StatusBadRequest, message: err.Error(), causes: err}
	case err != nil:
		return nil, err
	}
	return h.evaluate(ctx, req)
}

// authenticate asks the API server who the caller is.
func (h *Handler) authenticate(r *http.Request) (user.Info, error) {
	resp, ok, err := h.Authenticator.AuthenticateRequest(r)
	if err != nil || !ok {
		if err != nil {
			ctrl.LoggerFrom(r.Context()).V(1).Info("Dry-run request not authenticated", "error", err.Error())
		}
		return nil, &failure{code: http.StatusUnauthorized,
			message: "Unauthorized: send a bearer token the API server accepts (e.g. a ServiceAccount token)"}
	}
	return resp.User, nil
}

// readBody reads at most MaxBodyBytes of a JSON or YAML body.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || !supportedMediaTypes[mt] {
			return nil, &failure{code: http.StatusUnsupportedMediaType,
				message: fmt.Sprintf("Content-Type %q is not supported: send application/json or application/yaml", ct)}
		}
	}
	tooLarge := &failure{code: http.StatusRequestEntityTooLarge,
		message: fmt.Sprintf("the request body is larger than the limit of %d bytes", h.MaxBodyBytes)}
	if r.ContentLength > h.MaxBodyBytes {
		return nil, tooLarge
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.MaxBodyBytes))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, tooLarge
	case err != nil:
		return nil, &failure{code: http.StatusBadRequest, message: "reading the request body: " + err.Error()}
	}
	return data, nil
}

var supportedMediaTypes = map[string]bool{
	"application/json": true, "application/yaml": true, "application/x-yaml": true, "text/yaml": true,
}

// authorize asks the API server whether the caller may create VMs in namespace and, for
// candidate policies, ClusterIPAMPolicies. Decode calls it as soon as it knows the namespace.
func (h *Handler) authorize(ctx context.Context, caller user.Info, namespace string, withPolicies bool) error {
	checks := []authorizer.AttributesRecord{{User: caller, Verb: "create", Namespace: namespace,
		APIGroup: vmv1.GroupVersion.Group, APIVersion: vmv1.GroupVersion.Version, Resource: "virtualmachines",
		ResourceRequest: true}}
	if withPolicies {
		checks = append(checks, authorizer.AttributesRecord{User: caller, Verb: "create",
			APIGroup: v1alpha1.GroupVersion.Group, APIVersion: v1alpha1.GroupVersion.Version,
			Resource: "clusteripampolicies", ResourceRequest: true})
	}
	for _, a := range checks {
		decision, reason, err := h.Authorizer.Authorize(ctx, a)
		switch {
		case decision == authorizer.DecisionAllow:
			continue
		case err != nil:
			return fmt.Errorf("authorizing %s: %w", caller.GetName(), err)
		}
		return &failure{code: http.StatusForbidden, message: forbiddenMessage(a, reason)}
	}
	return nil
}

// forbiddenMessage reads like the API server's.
func forbiddenMessage(a authorizer.AttributesRecord, reason string) string {
	msg := fmt.Sprintf("User %q cannot create resource %q in API group %q", a.User.GetName(), a.Resource, a.APIGroup)
	if a.Namespace != "" {
		msg += fmt.Sprintf(" in the namespace %q", a.Namespace)
	} else {
		msg += " at the cluster scope"
	}
	msg += ", which a dry run of this request requires"
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}

// evaluate decides with the candidate policies or, once they are loaded, the installed ones.
func (h *Handler) evaluate(ctx context.Context, req *dryrun.Request) (*dryrun.Result, error) {
	var installed *evaluator.Set
	if req.Policies == nil {
		select {
		case <-h.Policies.Loaded():
			installed = h.Policies.Set()
		case <-ctx.Done():
			return nil, &failure{code: http.StatusServiceUnavailable,
				message: "the controller is still loading the installed policies; retry shortly"}
		}
	}
	start := time.Now()
	res, err := h.Engine.Evaluate(ctx, h.Reader, installed, req)
	if err != nil {
		return nil, err // Decode compiled the candidate policies: no *InvalidError here
	}
	metrics.DryRun.Evaluated(start)
	for _, it := range res.Interfaces {
		metrics.DryRun.Decided(it.Decision)
	}
	return res, nil
}

// internal turns an unexpected error into 504 when the time ran out, else 500.
func (h *Handler) internal(ctx context.Context, err error) *failure {
	if ctx.Err() != nil {
		return &failure{code: http.StatusGatewayTimeout,
			message: fmt.Sprintf("the evaluation did not finish within %s: %v", h.Timeout, err)}
	}
	ctrl.LoggerFrom(ctx).Error(err, "Dry-run evaluation failed")
	return &failure{code: http.StatusInternalServerError, message: "evaluation failed: " + err.Error()}
}

// admit takes a place among the evaluations in flight, or answers 429 when there is none.
func (h *Handler) admit(w http.ResponseWriter) (release func(), err error) {
	if h.InFlight == nil {
		return func() {}, nil
	}
	select {
	case h.InFlight <- struct{}{}:
		return func() { <-h.InFlight }, nil
	default:
		w.Header().Set("Retry-After", "1")
		return nil, &failure{code: http.StatusTooManyRequests,
			message: fmt.Sprintf("%d dry runs are being evaluated already; retry shortly", cap(h.InFlight))}
	}
}
