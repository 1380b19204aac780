package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/vmipam/vmipam/controller/dryrun"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/scheme"
	"github.com/vmipam/vmipam/evaluator"
)

// allow is an authorizer that allows what its function says and records what it was asked.
type allow struct {
	fn    func(authorizer.Attributes) bool
	asked []string
}

func (a *allow) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	a.asked = append(a.asked, attrs.GetVerb()+" "+attrs.GetResource())
	if a.fn(attrs) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no RBAC policy matched", nil
}

type loaded struct{ set *evaluator.Set }

func (l loaded) Set() *evaluator.Set { return l.set }
func (l loaded) Loaded() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

type indexer struct{ b *fake.ClientBuilder }

func (i indexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

func newStorage(t *testing.T, authz *allow, timeout time.Duration) *evaluations {
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
	defaults, err := engine.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	if err := index.Setup(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	spec, err := loadSpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	reader := b.WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}).Build()
	return &evaluations{engine: engine, reader: reader, policies: loaded{defaults}, authorizer: authz, timeout: timeout,
		spec: spec, crds: newClusterSchemas(reader)}
}

// request is the context the generic API server gives Create: the namespace of the path and
// the authenticated caller.
func request(namespace string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	return genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: "alice"})
}

func evaluation(vm string, policies ...string) *dryrunv1.Evaluation {
	ev := &dryrunv1.Evaluation{Spec: dryrunv1.EvaluationSpec{VM: &runtime.RawExtension{Raw: []byte(vm)}}}
	for _, p := range policies {
		ev.Spec.Policies = append(ev.Spec.Policies, runtime.RawExtension{Raw: []byte(p)})
	}
	return ev
}

const (
	webVM = `{"apiVersion": "virtualization.deckhouse.io/v1alpha2", "kind": "VirtualMachine", "metadata": {"name": "web"},
	  "spec": {"networks": [{"type": "Main"}, {"type": "ClusterNetwork", "name": "corp"}]}}`
	holdPolicy = `{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
	  "metadata": {"name": "hold-all"}, "spec": {"priority": 1, "allocation": {"expression": "'Auto'"},
	  "skipRules": [{"name": "hold", "expression": "true", "reason": "HeldByCandidate", "message": "held"}]}}`
)

func allowAll(authorizer.Attributes) bool { return true }

func TestCreateAnswersInTheStatusWith201(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	out, err := r.Create(request("team"), evaluation(webVM), nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := out.(*dryrunv1.Evaluation).Status
	if st.VM.Namespace != "team" || st.VM.Exists || len(st.Interfaces) != 1 || st.Interfaces[0].Reason != string(evaluator.ReasonNetworkNotFound) {
		t.Errorf("status = %+v, want web in team (the Evaluation's namespace), its corp interface skipped: NetworkNotFound", st)
	}
	if code := statusCode(err); code != http.StatusCreated {
		t.Errorf("code %d, want 201", code)
	}
}

func TestCreateReportsMalformedSpecAs422WithPathsBelowSpec(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	for _, tc := range []struct {
		name  string
		ev    *dryrunv1.Evaluation
		field string
	}{
		{"bad network type", evaluation(strings.Replace(webVM, `"ClusterNetwork"`, `"Bogus"`, 1)), "spec.vm.spec.networks[1].type"},
		{"policy that does not compile", evaluation(webVM, strings.Replace(holdPolicy, `"true"`, `"ipAdress.exists"`, 1)),
			"spec.policies[0].spec.skipRules[0].expression"},
		{"VM in another namespace", evaluation(strings.Replace(webVM, `"name": "web"`, `"name": "web", "namespace": "other"`, 1)),
			"spec.vm.metadata.namespace"},
		{"neither vm nor virtualMachineName", &dryrunv1.Evaluation{}, "spec.vm"},
		{"both", &dryrunv1.Evaluation{Spec: dryrunv1.EvaluationSpec{VM: &runtime.RawExtension{Raw: []byte(webVM)}, VirtualMachineName: "web"}},
			"spec.virtualMachineName"},
		{"a VM by name that does not exist", &dryrunv1.Evaluation{Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "nope"}}, "spec.virtualMachineName"},
		// The Evaluation's own metadata is echoed in the answer: checked as a create's.
		{"an Evaluation name that is no DNS subdomain", &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"},
			Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "web"}}, "metadata.name"},
		{"an Evaluation label key that is no qualified name", &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"bad key!": "v"}},
			Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "web"}}, "metadata.labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Create(request("team"), tc.ev, nil, &metav1.CreateOptions{})
			var st apierrors.APIStatus
			if !apierrors.IsInvalid(err) || !errors.As(err, &st) || st.Status().Code != http.StatusUnprocessableEntity {
				t.Fatalf("err = %v, want 422 Invalid", err)
			}
			found := false
			for _, c := range st.Status().Details.Causes {
				found = found || c.Field == tc.field
			}
			if !found {
				t.Errorf("causes %+v lack %s", st.Status().Details.Causes, tc.field)
			}
		})
	}
}

func TestCreateNeedsTheEvaluateVerbForCandidatePolicies(t *testing.T) {
	authz := &allow{fn: func(a authorizer.Attributes) bool { return a.GetVerb() != VerbEvaluate }}
	r := newStorage(t, authz, time.Minute)
	_, err := r.Create(request("team"), evaluation(webVM, holdPolicy), nil, &metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "alice" cannot evaluate resource "clusteripampolicies" in API group "ipam.virtualization.deckhouse.io" at the cluster scope`) {
		t.Fatalf("err = %v, want 403 naming the evaluate verb", err)
	}
	if !strings.Contains(err.Error(), "candidate policies in spec.policies require it") {
		t.Errorf("err = %v, want the reason in grammatical English", err)
	}
	if strings.Join(authz.asked, ",") != "evaluate clusteripampolicies" {
		t.Errorf("asked %v", authz.asked)
	}
	authz.fn = allowAll
	out, err := r.Create(request("team"), evaluation(webVM, holdPolicy), nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.(*dryrunv1.Evaluation).Status.Interfaces[0].Decision; d.Policy != "hold-all" {
		t.Errorf("decided by %q, want the candidate", d.Policy)
	}
}

func TestCreateNeedsGetOnAVMNamedByReference(t *testing.T) {
	r := newStorage(t, &allow{fn: func(a authorizer.Attributes) bool { return a.GetVerb() != "get" }}, time.Minute)
	_, err := r.Create(request("team"), &dryrunv1.Evaluation{Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "web"}}, nil, &metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `cannot get resource "virtualmachines"`) {
		t.Fatalf("err = %v, want 403 naming get virtualmachines", err)
	}
}

func TestCreatePastTheDeadlineIs504(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Nanosecond)
	_, err := r.Create(request("team"), evaluation(webVM), nil, &metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsTimeout(err) || !errors.As(err, &st) || st.Status().Code != http.StatusGatewayTimeout {
		t.Fatalf("err = %v, want 504 Timeout", err)
	}
}

// loading is a PolicySource that never finishes loading: an evaluation with the installed
// policies waits until its deadline.
type loading struct{}

func (loading) Set() *evaluator.Set     { return nil }
func (loading) Loaded() <-chan struct{} { return nil }

func TestOpenAPIDefinitionOfEvaluation(t *testing.T) {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }
	defs := definitions(ref)
	def, ok := defs[dryrunv1.Evaluation{}.OpenAPIModelName()]
	if !ok {
		t.Fatal("no definition for Evaluation")
	}
	if got := ptrRef(def.Schema.Properties["metadata"].Ref); !strings.HasSuffix(got, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta") {
		t.Errorf("metadata refers to %q, want ObjectMeta", got)
	}
	decision := def.Schema.Properties["status"].Properties["interfaces"].Items.Schema.Properties["decision"]
	for _, field := range []string{"allocation", "policy", "rule", "trace", "cost"} {
		if _, ok := decision.Properties[field]; !ok {
			t.Errorf("status.interfaces[].decision lacks %s: the schema must follow dryrunv1.Decision", field)
		}
	}
	var required func(path string, s spec.Schema)
	required = func(path string, s spec.Schema) {
		if len(s.Required) > 0 {
			t.Errorf("%s requires %v: the status is output only, kubectl must not refuse an Evaluation with an empty status", path, s.Required)
		}
		for name, p := range s.Properties {
			required(path+"."+name, p)
		}
		if s.Items != nil && s.Items.Schema != nil {
			required(path+"[]", *s.Items.Schema)
		}
	}
	required("status", def.Schema.Properties["status"])
	for _, dep := range def.Dependencies {
		if _, ok := defs[dep]; !ok {
			t.Errorf("dependency %s has no definition", dep)
		}
	}
	var _ common.ReferenceCallback = ref
}

func ptrRef(r spec.Ref) string { return r.String() }

func TestCreateOmitsTheInstalledPoliciesDetailsFromACallerWhoMayNotListThem(t *testing.T) {
	mayList := func(a authorizer.Attributes) bool { return true }
	may := newStorage(t, &allow{fn: mayList}, time.Minute)
	out, err := may.Create(request("team"), evaluation(webVM), nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := out.(*dryrunv1.Evaluation).Status
	if st.Policies.Source != dryrunv1.PoliciesInstalled || len(st.Policies.Order) == 0 || len(st.Interfaces[0].Decision.Trace.Matched) == 0 || len(st.Omitted) != 0 {
		t.Fatalf("a reader of the policies: status = %+v, want the order and the trace", st)
	}

	notList := func(a authorizer.Attributes) bool {
		return !(a.GetVerb() == "list" && a.GetResource() == "clusteripampolicies")
	}
	r := newStorage(t, &allow{fn: notList}, time.Minute)
	out, err = r.Create(request("team"), evaluation(webVM), nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st = out.(*dryrunv1.Evaluation).Status
	// The cost too: it sums every policy evaluated, so it told a caller how far a hidden
	// Audit policy's rule got (a secret recovered one prefix at a time).
	if len(st.Policies.Order) != 0 || !reflect.DeepEqual(st.Interfaces[0].Decision.Trace, dryrunv1.Trace{}) || st.Interfaces[0].Decision.Cost != 0 {
		t.Errorf("order %v, trace %+v, cost %d: want none for a caller who may not list clusteripampolicies", st.Policies.Order, st.Interfaces[0].Decision.Trace, st.Interfaces[0].Decision.Cost)
	}
	if !reflect.DeepEqual(st.Omitted, []string{dryrunv1.OmittedPolicyDetails}) {
		t.Errorf("omitted = %q, want it said", st.Omitted)
	}
	// What is omitted is absent from the answer, not there empty: `trace: {}`, `order: null`
	// and `cost: 0` read as "no trace", "no policies", "free".
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Status struct {
			Policies   map[string]any   `json:"policies"`
			Interfaces []map[string]any `json:"interfaces"`
		} `json:"status"`
	}
	if err := json.Unmarshal(data, &answer); err != nil {
		t.Fatal(err)
	}
	decision, _ := answer.Status.Interfaces[0]["decision"].(map[string]any)
	if _, ok := answer.Status.Policies["order"]; ok {
		t.Errorf("policies = %v, want order absent", answer.Status.Policies)
	}
	for _, key := range []string{"trace", "cost"} {
		if _, ok := decision[key]; ok {
			t.Errorf("decision = %v, want %s absent", decision, key)
		}
	}
	if st.Interfaces[0].Reason != string(evaluator.ReasonNetworkNotFound) || st.Interfaces[0].Decision.Policy == "" {
		t.Errorf("the decision a VM's user sees anyway must stay: %+v", st.Interfaces[0])
	}
}

// countingCRDs is a reader that counts the CustomResourceDefinitions it is asked for.
type countingCRDs struct {
	client.Reader
	gets atomic.Int64
}

func (c *countingCRDs) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if obj.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
		c.gets.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func TestCreateLooksUpNoCRDForAKindObjectsMayNotCarry(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	crds := &countingCRDs{Reader: r.reader}
	r.crds = newClusterSchemas(crds)
	ev := evaluation(webVM)
	ev.Spec.VM.Raw = []byte(strings.Replace(webVM, `"kind": "VirtualMachine"`, `"kind": "MadeUpMachine"`, 1))
	for i := range 50 {
		ev.Spec.Objects = append(ev.Spec.Objects, runtime.RawExtension{Raw: []byte(fmt.Sprintf(
			`{"apiVersion": "made-up-%d.example/v1", "kind": "Thing%d", "metadata": {"name": "x"}}`, i, i))})
	}
	ev.Spec.Objects = append(ev.Spec.Objects, runtime.RawExtension{Raw: []byte(
		`{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "IPAddress", "metadata": {"name": "a"}}`)},
		runtime.RawExtension{Raw: []byte(`{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "IPAddress", "metadata": {"name": "b"}}`)})
	_, err := r.Create(request("team"), ev, nil, &metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.objects[49].kind") {
		t.Errorf("err = %v, want 422 naming the made-up kinds", err)
	}
	if n := crds.gets.Load(); n != 1 {
		t.Errorf("%d CRD lookups, want 1: the IPAddress CRD once, nothing for made-up kinds", n)
	}
	if n := len(r.crds.cached); n != 1 {
		t.Errorf("%d cached schemas, want 1", n)
	}
}

func TestCreateRefusesMoreThanMaxObjectsBeforeLookingAtThem(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	crds := &countingCRDs{Reader: r.reader}
	r.crds = newClusterSchemas(crds)
	ev := evaluation(webVM)
	for range MaxObjects + 1 {
		ev.Spec.Objects = append(ev.Spec.Objects, runtime.RawExtension{Raw: []byte(
			`{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "IPAddress", "metadata": {"name": "a"}}`)})
	}
	_, err := r.Create(request("team"), ev, nil, &metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || len(st.Status().Details.Causes) != 1 || st.Status().Details.Causes[0].Field != "spec.objects" {
		t.Errorf("err = %v, want 422 at spec.objects", err)
	}
	if n := crds.gets.Load(); n != 0 {
		t.Errorf("%d CRD lookups, want none", n)
	}
}

// Candidate policies are bounded as objects are (issue #15, finding 4: ~48 policies in a
// 3 MiB body took ~45 s of CPU to compile): more than dryrun.MaxPolicies is a 422 at
// spec.policies before any is pruned against its CRD or compiled.
func TestCreateRefusesMoreThanMaxPoliciesBeforeLookingAtThem(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	crds := &countingCRDs{Reader: r.reader}
	r.crds = newClusterSchemas(crds)
	policies := make([]string, dryrun.MaxPolicies+1)
	for i := range policies {
		policies[i] = strings.Replace(holdPolicy, `"hold-all"`, fmt.Sprintf(`"hold-%d"`, i), 1)
	}
	_, err := r.Create(request("team"), evaluation(webVM, policies...), nil, &metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || len(st.Status().Details.Causes) != 1 || st.Status().Details.Causes[0].Field != "spec.policies" {
		t.Errorf("err = %v, want 422 at spec.policies", err)
	}
	if n := crds.gets.Load(); n != 0 {
		t.Errorf("%d CRD lookups, want none", n)
	}
}

func TestCreateIsA504WhenAClientCallRunsOutOfTime(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	r.reader = interceptor.NewClient(r.reader.(client.WithWatch), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			// client-go's rate limiter, refusing to wait past the deadline before it passed
			return fmt.Errorf("client rate limiter Wait returned an error: %w", errors.New("rate: Wait(n=1) would exceed context deadline"))
		}})
	_, err := r.Create(request("team"), evaluation(webVM), nil, &metav1.CreateOptions{})
	if code := statusCode(err); code != http.StatusGatewayTimeout {
		t.Errorf("code %d (%v), want 504", code, err)
	}
}

func TestCreateEchoesNoMoreThanAFewHundredBytesOfATooLongExpression(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	huge := strings.Repeat("1 + ", 256*1024) + "1 == 2"
	policy := strings.Replace(holdPolicy, `"expression": "true"`, `"expression": "`+huge+`"`, 1)
	_, err := r.Create(request("team"), evaluation(webVM, policy), nil, &metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) {
		t.Fatalf("err = %.500v, want 422", err)
	}
	at := "spec.policies[0].spec.skipRules[0].expression"
	var causes []metav1.StatusCause
	for _, c := range st.Status().Details.Causes {
		if c.Field == at {
			causes = append(causes, c)
		}
	}
	if len(causes) != 1 || causes[0].Type != metav1.CauseType(field.ErrorTypeTooLong) {
		t.Errorf("causes at %s: %.2000v, want only Too long", at, causes)
	}
	if n := len(err.Error()); n > 4096 {
		t.Errorf("the 422 is %d bytes: %.300s…", n, err.Error())
	}
}

func TestCreateNamesTheLabelOfTheWrongType(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	vm := strings.Replace(webVM, `"metadata": {"name": "web"}`, `"metadata": {"name": "web", "labels": {"b": "ok", "a": 5}}`, 1)
	_, err := r.Create(request("team"), evaluation(vm), nil, &metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || len(st.Status().Details.Causes) != 1 || st.Status().Details.Causes[0].Field != "spec.vm.metadata.labels.a" {
		t.Errorf("err = %v, want 422 at spec.vm.metadata.labels.a", err)
	}
}

func TestCreateRequiresTheNameOfANetworkInterface(t *testing.T) {
	r := newStorage(t, &allow{fn: allowAll}, time.Minute)
	vm := strings.Replace(webVM, `"name": "corp"`, `"name": null`, 1)
	_, err := r.Create(request("team"), evaluation(vm), nil, &metav1.CreateOptions{})
	var st apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &st) || len(st.Status().Details.Causes) != 1 ||
		st.Status().Details.Causes[0].Field != "spec.vm.spec.networks[1].name" || st.Status().Details.Causes[0].Type != metav1.CauseTypeFieldValueRequired {
		t.Errorf("err = %v, want 422 Required at spec.vm.spec.networks[1].name", err)
	}
}
