package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// The static estimate is checked against the limit each call is stopped at, so that an
// expression that compiles cannot fail at run time on an input within the declared bounds.
// Before, it was checked against 1,000,000 while calls stop at 100,000: this nested scan over
// vm.labels (~150,000 for 64 labels) compiled and then failed with a PolicyError.
func TestStaticEstimateIsCheckedAgainstThePerCallLimit(t *testing.T) {
	expr := "vm.labels.all(a, vm.labels.all(b, a == b || a != b))"
	_, errs := newCompiler(t).Compile(newPolicy("p", matchCondition("m", expr)), nil)
	if len(errs) != 1 || errs[0].Field != "spec.matchConditions[0].expression" ||
		!strings.Contains(errs[0].Error(), "exceeds the per-call limit 100000") {
		t.Fatalf("Compile errors = %v, want the estimate refused against the per-call limit", errs)
	}
}

// The bounds the estimate assumes are enforced on the input: an input beyond them is refused
// before any policy runs, naming the field, and nothing existing is touched (allocation
// unknown). Before, labels beyond the bound were evaluated as if the estimate covered them.
func TestInputBeyondTheDeclaredBoundsIsRefused(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*evaluator.Input)
		field string
	}{
		{"too many labels", func(in *evaluator.Input) {
			for i := range 257 {
				in.VM.Labels[fmt.Sprintf("l%d", i)] = "v"
			}
		}, "vm.labels: 257 entries"},
		{"a long annotation value", func(in *evaluator.Input) {
			in.VM.Annotations["a"] = strings.Repeat("x", 256*1024+1)
		}, "vm.annotations[a]: 262145 characters"},
		{"too many holders", func(in *evaluator.Input) {
			for i := range 257 {
				in.Holders.VMs = append(in.Holders.VMs, fmt.Sprintf("vm-%d", i))
			}
		}, "holders.vms: 257 entries"},
	}
	set := defaultSet(t, newCompiler(t))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := pooledAuto()
			in.VM.Labels, in.VM.Annotations = map[string]string{}, map[string]string{}
			tc.edit(&in)
			d := decide(set, in)
			if d.Allocation != evaluator.AllocationUnknown || d.Reason != evaluator.ReasonPolicyError ||
				!strings.Contains(d.Message, tc.field) {
				t.Errorf("decision = %q %q %q, want a PolicyError naming %q", d.Allocation, d.Reason, d.Message, tc.field)
			}
		})
	}
	if d := decide(set, pooledAuto()); d.Allocation != evaluator.AllocationAuto {
		t.Errorf("an input within bounds: %+v, want Auto", d)
	}
}
