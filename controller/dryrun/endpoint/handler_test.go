package endpoint_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/dryrun/endpoint"
	"github.com/vmipam/vmipam/controller/scheme"
	"github.com/vmipam/vmipam/evaluator"
)

// policySource is a loaded (or not) snapshot.
type policySource struct {
	set    *evaluator.Set
	loaded chan struct{}
}

func (p policySource) Set() *evaluator.Set     { return p.set }
func (p policySource) Loaded() <-chan struct{} { return p.loaded }

// Tokens the fake authenticator knows: vm-user may dry-run VMs in demo, author may also try
// policies, nobody may do nothing.
var tokens = map[string]string{"t-vm-user": "vm-user", "t-author": "author", "t-nobody": "nobody"}

var authn = authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
	name, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, ok, nil
})

var authz = authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	switch {
	case a.GetUser().GetName() == "nobody":
	case a.GetResource() == "virtualmachines" && a.GetNamespace() == "demo" && a.GetVerb() == "create":
		return authorizer.DecisionAllow, "", nil
	case a.GetResource() == "clusteripampolicies" && a.GetUser().GetName() == "author":
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC rule allows it", nil
})

func newHandler(t *testing.T, loaded bool) *endpoint.Handler {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := dryrun.NewEngine(c, s)
	if err != nil {
		t.Fatal(err)
	}
	set, err := engine.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	src := policySource{set: set, loaded: make(chan struct{})}
	if loaded {
		close(src.loaded)
	}
	return &endpoint.Handler{Engine: engine, Reader: emptyCluster(t, s), Policies: src, Authenticator: authn,
		Authorizer: authz, MaxBodyBytes: 64 << 10, Timeout: 200 * time.Millisecond}
}

const body = `{"vm": {"metadata": {"name": "web", "namespace": "demo"}, "spec": {"networks": [{"type": "ClusterNetwork", "name": "corp"}]}}}`

// call sends a POST with the token (none when empty) and returns the code and body.
func call(t *testing.T, h http.Handler, token string, body io.Reader, header ...string) (int, []byte) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, dryrun.Path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func status(t *testing.T, data []byte) *metav1.Status {
	t.Helper()
	s := &metav1.Status{}
	if err := json.Unmarshal(data, s); err != nil || s.Kind != "Status" {
		t.Fatalf("answer is not a metav1.Status: %s", data)
	}
	return s
}

func TestAnswersAndRefusals(t *testing.T) {
	h := newHandler(t, true)
	policies := `{"vm": {"metadata": {"name": "web", "namespace": "demo"}, "spec": {"networks": [{"type": "ClusterNetwork", "name": "corp"}]}},
		"policies": [{"metadata": {"name": "p"}, "spec": {"allocation": {"expression": "'None'"}}}]}`
	cases := []struct {
		name, token, body string
		header            []string
		code              int
		message           string
	}{
		{"no token", "", body, nil, http.StatusUnauthorized, "Unauthorized"},
		{"an unknown token", "t-forged", body, nil, http.StatusUnauthorized, "Unauthorized"},
		{"no RBAC", "t-nobody", body, nil, http.StatusForbidden,
			`User "nobody" cannot create resource "virtualmachines" in API group "virtualization.deckhouse.io" in the namespace "demo"`},
		{"another namespace", "t-vm-user", strings.Replace(body, `"demo"`, `"prod"`, 1), nil, http.StatusForbidden, `in the namespace "prod"`},
		{"policies without policy RBAC", "t-vm-user", policies, nil, http.StatusForbidden,
			`cannot create resource "clusteripampolicies" in API group "ipam.virtualization.deckhouse.io" at the cluster scope`},
		{"policies with policy RBAC", "t-author", policies, nil, http.StatusOK, ""},
		{"a body over the limit", "t-vm-user", body + strings.Repeat(" ", 64<<10), nil, http.StatusRequestEntityTooLarge, "larger than the limit of 65536 bytes"},
		{"another content type", "t-vm-user", body, []string{"Content-Type", "text/plain"}, http.StatusUnsupportedMediaType, "not supported"},
		{"invalid input", "t-vm-user", `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: Bogus}]}}`,
			[]string{"Content-Type", "application/yaml"}, http.StatusBadRequest, `vm.spec.networks[0].type: Unsupported value: "Bogus"`},
		{"YAML", "t-vm-user", "vm:\n  metadata: {name: web, namespace: demo}\n  spec: {networks: [{type: Network, name: lan}]}\n",
			[]string{"Content-Type", "application/yaml"}, http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, data := call(t, h, tc.token, strings.NewReader(tc.body), tc.header...)
			if code != tc.code {
				t.Fatalf("code %d, want %d: %s", code, tc.code, data)
			}
			if tc.code == http.StatusOK {
				res := &dryrun.Result{}
				if err := json.Unmarshal(data, res); err != nil || res.Kind != dryrun.KindResult || len(res.Interfaces) != 1 {
					t.Errorf("answer is not a result with one interface: %s", data)
				}
				return
			}
			if s := status(t, data); s.Code != int32(tc.code) || !strings.Contains(s.Message, tc.message) {
				t.Errorf("status %d %q, want %d containing %q", s.Code, s.Message, tc.code, tc.message)
			}
		})
	}
}

func TestInvalidInputListsEveryCauseWithItsPath(t *testing.T) {
	h := newHandler(t, true)
	code, data := call(t, h, "t-author", strings.NewReader(`{"vm": {"metadata": {"name": "web", "namespace": "demo"},
		"spec": {"networks": [{"type": "ClusterNetwork", "name": "corp"}]}},
		"policies": [{"metadata": {"name": "p"}, "spec": {"allocation": {"expression": "'Auto'"},
		  "skipRules": [{"name": "a", "reason": "R", "expression": "ipAdress.exists"}]}}]}`))
	if code != http.StatusBadRequest {
		t.Fatalf("code %d: %s", code, data)
	}
	s := status(t, data)
	if s.Reason != metav1.StatusReasonBadRequest || s.Details == nil || len(s.Details.Causes) != 1 ||
		s.Details.Causes[0].Field != "policies[0].spec.skipRules[0].expression" ||
		!strings.Contains(s.Details.Causes[0].Message, "undeclared reference to 'ipAdress'") {
		t.Errorf("status = %+v, want one cause at policies[0].spec.skipRules[0].expression", s)
	}
}

func TestInvalidInputListsTheProblemsOfEveryPartAtOnce(t *testing.T) {
	h := newHandler(t, true)
	code, data := call(t, h, "t-author", strings.NewReader(`{"vm": {"metadata": {"name": "web", "namespace": "demo"},
		"spec": {"networks": [{"type": "Bogus", "name": "corp"}]}},
		"policies": [{"metadata": {"name": "p"}, "spec": {"allocation": {"expression": "'Auto'"},
		  "skipRules": [{"name": "a", "reason": "R", "expression": "ipAdress.exists"}]}},
		  {"metadata": {"name": "q"}, "spec": {"allocation": {"expression": "vm.nmae"}}}],
		"objects": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}`))
	if code != http.StatusBadRequest {
		t.Fatalf("code %d: %s", code, data)
	}
	var fields []string
	if s := status(t, data); s.Details != nil {
		for _, c := range s.Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	want := []string{"vm.spec.networks[0].type", "policies[0].spec.skipRules[0].expression",
		"policies[1].spec.allocation.expression", "objects[0].kind"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Errorf("causes at %v, want %v", fields, want)
	}
}

func TestCandidatePoliciesAreCompiledOnlyForCallersAllowedToTryThem(t *testing.T) {
	h := newHandler(t, true)
	compiled := 0
	h.Engine.OnCompileError = func() { compiled++ }
	broken := `{"vm": {"metadata": {"name": "web", "namespace": "demo"},
		"spec": {"networks": [{"type": "ClusterNetwork", "name": "corp"}]}},
		"policies": [{"metadata": {"name": "p"}, "spec": {"allocation": {"expression": "ipAdress.exists"}}}]}`
	code, data := call(t, h, "t-vm-user", strings.NewReader(broken))
	if code != http.StatusForbidden || !strings.Contains(status(t, data).Message, "clusteripampolicies") || compiled != 0 {
		t.Errorf("without the policy RBAC: code %d, %d compile errors: %s; want 403 for clusteripampolicies, nothing compiled", code, compiled, data)
	}
	if code, _ := call(t, h, "t-author", strings.NewReader(broken)); code != http.StatusBadRequest || compiled != 1 {
		t.Errorf("with the policy RBAC: code %d, %d compile errors; want 400 after compiling the policy once", code, compiled)
	}
}

// chunked hides the length of a reader, as a streamed body does.
type chunked struct{ io.Reader }

func TestAStreamedBodyOverTheLimitIs413(t *testing.T) {
	h := newHandler(t, true)
	code, withLength := call(t, h, "t-vm-user", strings.NewReader(body+strings.Repeat(" ", 1<<20)))
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("with Content-Length: code %d, want 413: %s", code, withLength)
	}
	req := httptest.NewRequest(http.MethodPost, dryrun.Path, chunked{strings.NewReader(body + strings.Repeat(" ", 1<<20))})
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer t-vm-user")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || rec.Body.String() != string(withLength) ||
		status(t, rec.Body.Bytes()).Reason != metav1.StatusReasonRequestEntityTooLarge {
		t.Errorf("streamed: code %d, body %s; want 413 with the Status of the Content-Length case: %s", rec.Code, rec.Body, withLength)
	}
}

// TestAStreamedBodyOverTheLimitIs413OverTheWire sends the body chunked (HTTP/1.1) or as
// DATA frames without a length (HTTP/2), over TLS, while the server answers early: the client
// must still read the whole Status.
func TestAStreamedBodyOverTheLimitIs413OverTheWire(t *testing.T) {
	h := newHandler(t, true)
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(h)
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		t.Cleanup(srv.Close)
		for _, streamed := range []bool{false, true} {
			var r io.Reader = strings.NewReader(body + strings.Repeat(" ", 4<<20))
			if streamed {
				r = chunked{r}
			}
			req, err := http.NewRequest(http.MethodPost, srv.URL+dryrun.Path, r)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer t-vm-user")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("HTTP/2 %v, streamed %v: %v", h2, streamed, err)
			}
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("%s, streamed %v: %d, reading the body: %v", resp.Proto, streamed, resp.StatusCode, err)
			}
			if s := status(t, data); s.Code != http.StatusRequestEntityTooLarge || !strings.Contains(s.Message, "larger than the limit of 65536 bytes") {
				t.Errorf("%s, streamed %v: status %+v, want the 413 Status", resp.Proto, streamed, s)
			}
		}
	}
}

func TestOnlyPOSTIsServed(t *testing.T) {
	h := newHandler(t, true)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, dryrun.Path, nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != http.MethodPost {
		t.Errorf("GET: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

func TestWaitsForTheInstalledPoliciesWithinTheTimeout(t *testing.T) {
	h := newHandler(t, false)
	code, data := call(t, h, "t-vm-user", strings.NewReader(body))
	if code != http.StatusServiceUnavailable || !strings.Contains(status(t, data).Message, "still loading") {
		t.Errorf("code %d: %s, want 503 while the policies load", code, data)
	}
}

func TestAnswersInYAMLWhenAsked(t *testing.T) {
	h := newHandler(t, true)
	code, data := call(t, h, "t-vm-user", strings.NewReader(body), "Accept", "application/yaml")
	if code != http.StatusOK || !strings.Contains(string(data), "\nkind: Evaluation\n") {
		t.Errorf("code %d: %s, want a YAML result", code, data)
	}
}

func TestRequestsAndDecisionsAreCounted(t *testing.T) {
	h := newHandler(t, true)
	forbidden := map[string]string{"code": "403"}
	notFound := map[string]string{"source": "dryrun", "outcome": "Skipped", "reason": "NetworkNotFound"}
	before, decided := counter(t, "vmipam_dryrun_requests_total", forbidden), counter(t, "vmipam_decisions_total", notFound)
	call(t, h, "t-nobody", strings.NewReader(body))
	call(t, h, "t-vm-user", strings.NewReader(body))
	if got := counter(t, "vmipam_dryrun_requests_total", forbidden) - before; got != 1 {
		t.Errorf("403 answers counted: %v, want 1", got)
	}
	if got := counter(t, "vmipam_decisions_total", notFound) - decided; got != 1 {
		t.Errorf("dry-run decisions counted: %v, want 1", got)
	}
}

// blockingReader never answers before its context ends, like an API server that hangs.
type blockingReader struct{ client.Reader }

func (blockingReader) Get(ctx context.Context, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestAnEvaluationPastTheTimeoutIs504(t *testing.T) {
	h := newHandler(t, true)
	h.Reader = blockingReader{h.Reader}
	code, data := call(t, h, "t-vm-user", strings.NewReader(body))
	if code != http.StatusGatewayTimeout || status(t, data).Reason != metav1.StatusReasonTimeout {
		t.Errorf("code %d: %s, want 504", code, data)
	}
}

func TestEvaluationsBeyondTheInFlightLimitAre429(t *testing.T) {
	h := newHandler(t, true)
	h.InFlight = endpoint.NewInFlight(1)
	h.InFlight <- struct{}{} // one evaluation is running
	req := httptest.NewRequest(http.MethodPost, dryrun.Path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer t-vm-user")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" ||
		!strings.Contains(status(t, rec.Body.Bytes()).Message, "retry shortly") {
		t.Errorf("with the limit reached: %d, Retry-After %q, %s; want 429 with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if code, _ := call(t, h, "", strings.NewReader(body)); code != http.StatusUnauthorized {
		t.Errorf("an unauthenticated request got %d, want 401 before any limit", code)
	}
	<-h.InFlight // it finished
	if code, data := call(t, h, "t-vm-user", strings.NewReader(body)); code != http.StatusOK {
		t.Errorf("after the running evaluation finished: %d %s, want 200", code, data)
	}
	if len(h.InFlight) != 0 {
		t.Errorf("%d places still taken after the answer, want 0", len(h.InFlight))
	}
}
