package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// createOnly answers every request for evaluations but a create of the collection with 405
// MethodNotAllowed: an Evaluation is never stored, so there is nothing to get, list, update,
// patch or delete. Without it the library answers an item path it has no route for with 404,
// which reads as "that Evaluation does not exist" rather than "evaluations cannot be
// deleted". It runs after authentication and authorization (as the API server refuses a verb
// only to a caller allowed to use it).
func createOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericapirequest.RequestInfoFrom(req.Context())
		if ok && info.IsResourceRequest && info.APIGroup == dryrunv1.GroupName && info.Resource == dryrunv1.Resource &&
			(info.Verb != "create" || info.Name != "" || info.Subresource != "") {
			gv := dryrunv1.SchemeGroupVersion
			err := apierrors.NewMethodNotSupported(gv.WithResource(dryrunv1.Resource).GroupResource(), info.Verb)
			responsewriters.ErrorNegotiated(err, Codecs, gv, w, req)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// advertiseFieldValidation adds to the group's OpenAPI v3 document a PATCH operation on an
// Evaluation with the fieldValidation parameter. kubectl decides whether a server validates
// fields itself (it then sends fieldValidation=Strict and skips its own validation) by
// looking for that parameter on the PATCH operation of the kind, and nowhere else
// (k8s.io/cli-runtime's query-param verifier). Finding no PATCH, it falls back to
// validating on the client, which lists every CRD of the cluster first — forbidden to
// users who may only create evaluations. The server does validate fields (the create takes
// fieldValidation: unknown fields are errors, warnings or ignored, as for a custom
// resource); the operation says that a PATCH itself is always 405, as createOnly answers.
func advertiseFieldValidation(doc *spec3.OpenAPI) (*spec3.OpenAPI, error) {
	if doc == nil || doc.Paths == nil {
		return doc, nil
	}
	gv := dryrunv1.SchemeGroupVersion
	collection := "/apis/" + gv.String() + "/namespaces/{namespace}/" + dryrunv1.Resource
	create, ok := doc.Paths.Paths[collection]
	if !ok || create.Post == nil {
		return doc, nil // another group's document
	}
	var params []*spec3.Parameter
	for _, p := range create.Post.Parameters {
		if p.Name == "fieldValidation" || p.Name == "dryRun" || p.Name == "fieldManager" {
			params = append(params, p)
		}
	}
	patch := &spec3.Operation{
		OperationProps: spec3.OperationProps{
			Description: "Evaluations cannot be patched: the answer is always 405 MethodNotAllowed. The operation is listed so that " +
				"kubectl sees that the server validates fields itself (the fieldValidation parameter of create).",
			OperationId: "patchDryrunIpamVirtualizationDeckhouseIoV1alpha1NamespacedEvaluation",
			Tags:        create.Post.Tags,
			Parameters:  params,
			Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
				http.StatusMethodNotAllowed: {ResponseProps: spec3.ResponseProps{Description: "MethodNotAllowed"}}}}},
		},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{
			"x-kubernetes-action": "patch",
			"x-kubernetes-group-version-kind": map[string]any{
				"group": gv.Group, "version": gv.Version, "kind": dryrunv1.Kind},
		}},
	}
	name := &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: "name", In: "path", Required: true,
		Description: "name of the Evaluation", Schema: spec.StringProperty()}}
	item := &spec3.Path{PathProps: spec3.PathProps{Patch: patch, Parameters: append([]*spec3.Parameter{name}, create.Parameters...)}}
	doc.Paths.Paths[collection+"/{name}"] = item
	return doc, nil
}
