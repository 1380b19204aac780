package v1alpha1

import (
	sigsjson "sigs.k8s.io/json"
)

// UnmarshalJSON decodes a spec leniently and keeps the JSON it came from. A value of the
// wrong type (virtualMachineName: 5) leaves the fields empty instead of failing: the
// decoder's error would reach the caller as a 400 with a Go message, where the API server
// answers a custom resource with a 422 naming the field. The server validates the received
// JSON against Evaluation's schema instead (Received), which names the field, and finds
// unknown fields there as the API server does for custom resources, under the request's
// fieldValidation. Keys match case-sensitively, as the API server's decoder does.
func (s *EvaluationSpec) UnmarshalJSON(data []byte) error {
	type fields EvaluationSpec // the same fields, without this method
	var f fields
	problem := ""
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &f); err != nil {
		f, problem = fields{}, err.Error()
	}
	*s = EvaluationSpec(f)
	s.received, s.decodeError = append([]byte(nil), data...), problem
	return nil
}

// Received returns the JSON the spec was decoded from (nil for a spec built in Go) and why
// it did not fit the typed fields (empty when they hold it all).
func (s *EvaluationSpec) Received() (data []byte, problem string) { return s.received, s.decodeError }

// UnmarshalJSON decodes a status leniently: the status of a request is ignored (the server
// answers in it), so whatever a client sends there — a status copied from an earlier answer,
// or junk — must not fail the request with a decoder's message. A status that does not decode
// is left empty; an answer's status always decodes.
func (s *EvaluationStatus) UnmarshalJSON(data []byte) error {
	type fields EvaluationStatus // the same fields, without this method
	var f fields
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &f); err != nil {
		f = fields{}
	}
	*s = EvaluationStatus(f)
	return nil
}
