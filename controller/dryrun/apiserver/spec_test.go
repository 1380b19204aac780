package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/kube-openapi/pkg/spec3"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

func TestSpecOfTheWrongTypeIsAnErrorAtItsField(t *testing.T) {
	s, err := loadSpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	var spec dryrunv1.EvaluationSpec
	if err := spec.UnmarshalJSON([]byte(`{"virtualMachineName": 5, "bogus": 1}`)); err != nil {
		t.Fatalf("the spec decodes leniently: %v", err)
	}
	data, problem := spec.Received()
	if problem == "" {
		t.Fatal("the decoder's problem is kept")
	}
	errs, warnings := s.check(data, problem, metav1.FieldValidationStrict)
	if !hasError(errs, "spec.virtualMachineName", field.ErrorTypeTypeInvalid) || !hasError(errs, "spec.bogus", field.ErrorTypeInvalid) || len(warnings) != 0 {
		t.Errorf("Strict: errs %v, warnings %v; want spec.virtualMachineName and spec.bogus", errs, warnings)
	}
	errs, warnings = s.check(data, problem, metav1.FieldValidationWarn)
	if hasError(errs, "spec.bogus", field.ErrorTypeInvalid) || len(warnings) != 1 || warnings[0] != `unknown field "spec.bogus"` {
		t.Errorf("Warn: errs %v, warnings %v; want a warning for spec.bogus", errs, warnings)
	}
}

func TestSpecWithADuplicatedKeyIsAnErrorUnderStrictAndAWarningUnderWarn(t *testing.T) {
	s, err := loadSpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"virtualMachineName": "a", "virtualMachineName": "b",
	  "vm": {"metadata": {"name": "x", "name": "y"}}, "policies": [{"kind": "A", "kind": "B"}], "objects": [{"metadata": {}, "metadata": {}}]}`)
	want := []string{"spec.virtualMachineName", "spec.vm.metadata.name", "spec.policies[0].kind", "spec.objects[0].metadata"}
	errs, warnings := s.check(data, "", metav1.FieldValidationStrict)
	for _, p := range want {
		if !hasError(errs, p, field.ErrorTypeInvalid) || !strings.Contains(errs.ToAggregate().Error(), `duplicate field "`+p+`"`) {
			t.Errorf("Strict: errs %v, want duplicate field %q", errs, p)
		}
	}
	if len(warnings) != 0 {
		t.Errorf("Strict: warnings %v", warnings)
	}
	errs, warnings = s.check(data, "", metav1.FieldValidationWarn)
	for _, p := range want {
		if hasError(errs, p, field.ErrorTypeInvalid) || !slices.Contains(warnings, `duplicate field "`+p+`"`) {
			t.Errorf("Warn: errs %v, warnings %v; want a warning for %s", errs, warnings, p)
		}
	}
}

func hasError(errs field.ErrorList, path string, typ field.ErrorType) bool {
	for _, e := range errs {
		if e.Field == path && e.Type == typ {
			return true
		}
	}
	return false
}

func TestOnlyACreateOfTheCollectionPasses(t *testing.T) {
	passed := false
	h := createOnly(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed = true }))
	for _, tc := range []struct {
		verb, name string
		pass       bool
	}{{"create", "", true}, {"create", "x", false}, {"get", "x", false}, {"list", "", false}, {"delete", "x", false}, {"patch", "x", false}} {
		passed = false
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req = req.WithContext(genericapirequest.WithRequestInfo(req.Context(), &genericapirequest.RequestInfo{IsResourceRequest: true,
			Verb: tc.verb, APIGroup: dryrunv1.GroupName, APIVersion: "v1alpha1", Resource: dryrunv1.Resource, Name: tc.name}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if passed != tc.pass || !tc.pass && rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s %q: passed %v, code %d", tc.verb, tc.name, passed, rec.Code)
		}
	}
}

func TestTheOpenAPIDocumentShowsKubectlTheFieldValidationParameter(t *testing.T) {
	collection := "/apis/" + dryrunv1.SchemeGroupVersion.String() + "/namespaces/{namespace}/" + dryrunv1.Resource
	fv := &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: "fieldValidation", In: "query"}}
	doc := &spec3.OpenAPI{Paths: &spec3.Paths{Paths: map[string]*spec3.Path{
		collection: {PathProps: spec3.PathProps{Post: &spec3.Operation{OperationProps: spec3.OperationProps{Parameters: []*spec3.Parameter{fv}}}}}}}}
	doc, err := advertiseFieldValidation(doc)
	if err != nil {
		t.Fatal(err)
	}
	item := doc.Paths.Paths[collection+"/{name}"]
	if item == nil || item.Patch == nil {
		t.Fatal("no PATCH operation on an Evaluation")
	}
	gvk, _ := item.Patch.Extensions["x-kubernetes-group-version-kind"].(map[string]any)
	if gvk["kind"] != dryrunv1.Kind || gvk["group"] != dryrunv1.GroupName {
		t.Errorf("the PATCH operation is not the kind's: %v", gvk)
	}
	if len(item.Patch.Parameters) != 1 || item.Patch.Parameters[0].Name != "fieldValidation" {
		t.Errorf("parameters %v, want fieldValidation", item.Patch.Parameters)
	}
	if !strings.Contains(item.Patch.Description, "405") {
		t.Error("the operation does not say it is always refused")
	}
}

func TestNullListsInSpecAreAbsent(t *testing.T) {
	s, err := loadSpecSchema()
	if err != nil {
		t.Fatal(err)
	}
	errs, warnings := s.check([]byte(`{"virtualMachineName": "web", "policies": null, "objects": null}`), "", metav1.FieldValidationStrict)
	if len(errs) != 0 || len(warnings) != 0 {
		t.Errorf("errs %v, warnings %v; want none", errs, warnings)
	}
}

func TestAJunkStatusInARequestIsIgnored(t *testing.T) {
	ev := &dryrunv1.Evaluation{}
	if err := json.Unmarshal([]byte(`{"spec": {"virtualMachineName": "web"}, "status": "junk"}`), ev); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if ev.Spec.VirtualMachineName != "web" {
		t.Errorf("spec = %+v", ev.Spec)
	}
	if err := json.Unmarshal([]byte(`{"status": {"vm": {"name": "web"}, "omitted": ["x"]}}`), ev); err != nil || ev.Status.VM.Name != "web" || len(ev.Status.Omitted) != 1 {
		t.Errorf("an answer's status: %+v, %v", ev.Status, err)
	}
}
