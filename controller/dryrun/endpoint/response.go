package endpoint

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller/dryrun"
)

// reasons maps the status codes the handler answers with to metav1.Status reasons.
var reasons = map[int]metav1.StatusReason{
	http.StatusBadRequest:            metav1.StatusReasonBadRequest,
	http.StatusUnauthorized:          metav1.StatusReasonUnauthorized,
	http.StatusForbidden:             metav1.StatusReasonForbidden,
	http.StatusNotFound:              metav1.StatusReasonNotFound,
	http.StatusMethodNotAllowed:      metav1.StatusReasonMethodNotAllowed,
	http.StatusRequestEntityTooLarge: metav1.StatusReasonRequestEntityTooLarge,
	http.StatusUnsupportedMediaType:  metav1.StatusReasonUnsupportedMediaType,
	http.StatusServiceUnavailable:    metav1.StatusReasonServiceUnavailable,
	http.StatusGatewayTimeout:        metav1.StatusReasonTimeout,
	http.StatusInternalServerError:   metav1.StatusReasonInternalError,
}

// status is the metav1.Status body of a failure; an invalid request lists every problem as
// a cause with its field path.
func status(f *failure) *metav1.Status {
	s := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Code: int32(f.code), Reason: reasons[f.code], Message: f.message}
	if s.Reason == "" {
		s.Reason = metav1.StatusReasonUnknown
	}
	var inv *dryrun.InvalidError
	if errors.As(f.causes, &inv) {
		s.Message = "the dry-run request is invalid: " + f.message
		s.Details = &metav1.StatusDetails{Kind: dryrun.KindRequest, Causes: causes(inv.Errs)}
	}
	return s
}

func causes(errs field.ErrorList) []metav1.StatusCause {
	out := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		out = append(out, metav1.StatusCause{Type: metav1.CauseType(e.Type), Field: e.Field, Message: e.ErrorBody()})
	}
	return out
}

func writeStatus(w http.ResponseWriter, r *http.Request, f *failure) {
	if f.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="vmipam dry-run"`)
	}
	write(w, r, f.code, status(f))
}

func writeResult(w http.ResponseWriter, r *http.Request, res *dryrun.Result) {
	write(w, r, http.StatusOK, res)
}

// write encodes v as YAML when the client accepts YAML and not JSON first, else as JSON.
func write(w http.ResponseWriter, r *http.Request, code int, v any) {
	data, err := json.Marshal(v)
	contentType := "application/json"
	if err == nil && wantsYAML(r.Header.Get("Accept")) {
		if y, yerr := yaml.JSONToYAML(data); yerr == nil {
			data, contentType = y, "application/yaml"
		}
	}
	if err != nil {
		code, contentType = http.StatusInternalServerError, "text/plain; charset=utf-8"
		data = []byte("encoding the answer: " + err.Error())
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(data) // the client went away; nothing to tell it
}

func wantsYAML(accept string) bool {
	y := strings.Index(accept, "yaml")
	j := strings.Index(accept, "json")
	return y >= 0 && (j < 0 || y < j)
}
