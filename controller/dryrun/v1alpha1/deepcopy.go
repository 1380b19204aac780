package v1alpha1

import "encoding/json"

// DeepCopyInto copies the status through its JSON form. The status carries the types of the
// controller and the evaluator (InterfaceResult, Decision and its trace, which other packages
// own and extend), which have no generated deep copies; their JSON form is exactly what an
// Evaluation carries over the wire, so the copy loses nothing a client can see. An
// Evaluation is copied at most a few times per request.
func (in *EvaluationStatus) DeepCopyInto(out *EvaluationStatus) {
	data, err := json.Marshal(in)
	if err != nil {
		panic("v1alpha1: encoding an EvaluationStatus: " + err.Error()) // only plain data: cannot fail
	}
	*out = EvaluationStatus{}
	if err := json.Unmarshal(data, out); err != nil {
		panic("v1alpha1: decoding an EvaluationStatus: " + err.Error())
	}
}

// DeepCopy returns a deep copy of the status.
func (in *EvaluationStatus) DeepCopy() *EvaluationStatus {
	if in == nil {
		return nil
	}
	out := new(EvaluationStatus)
	in.DeepCopyInto(out)
	return out
}
