package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// The bounds the estimate assumes are enforced on the input: an input beyond them is refused
// before the policy reading the field runs, naming the field, and nothing existing is touched
// (allocation unknown). Before, labels beyond the bound were evaluated as if the estimate covered them.
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
	reader := newPolicy("reader", matchCondition("m", "size(vm.labels) + size(vm.annotations) + size(holders.vms) >= 0"))
	set := setOf(t, newCompiler(t), reader)
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

// Only the bounds of the fields some policy of the set reads are enforced: Kubernetes allows
// a VM 300 labels, and before, such a VM got a PolicyError on every interface ("vm.labels:
// 300 entries, at most 256") though no policy read its labels.
func TestOnlyTheFieldsPoliciesReadAreBounded(t *testing.T) {
	c := newCompiler(t)
	in := pooledAuto()
	in.VM.Labels = map[string]string{}
	for i := range 300 {
		in.VM.Labels[fmt.Sprintf("l%d", i)] = "v"
	}
	for _, set := range []*evaluator.Set{defaultSet(t, c),
		setOf(t, c, newPolicy("annotations", matchCondition("m", "!('x' in vm.annotations)")))} {
		if d := decide(set, in); d.Reason == evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationAuto {
			t.Errorf("policies %v: decision %s %q, want Auto: no policy reads vm.labels", set.Policies(), d.Reason, d.Message)
		}
	}
	for _, expr := range []string{"vm.labels.exists(k, k == 'team')", "'team' in vm.labels", "has(vm.labels.team)", "[vm].size() == 1"} {
		d := decide(setOf(t, c, newPolicy("labels", matchCondition("m", expr))), in)
		if d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, "vm.labels: 300 entries, at most 256") {
			t.Errorf("%s: decision %s %q, want a PolicyError naming vm.labels", expr, d.Reason, d.Message)
		}
	}
}

// An input beyond the bounds of a field only some policies read is the error of those
// policies, handled by each one's mode and failurePolicy like any other evaluation error: a
// Fail policy's PolicyError names it, an Ignore policy is passed over, an Audit policy's record
// holds the error, and the others decide. Before, the whole interface failed, blamed on the
// built-in default, even when only an Audit or Ignore policy read the field.
func TestAnInputBeyondTheBoundsIsTheErrorOfThePoliciesReadingIt(t *testing.T) {
	c := newCompiler(t)
	in := pooledAuto()
	in.VM.Labels = map[string]string{}
	for i := range 300 {
		in.VM.Labels[fmt.Sprintf("l%d", i)] = "v"
	}
	const beyond = "input: beyond the bounds the policy is compiled against: vm.labels: 300 entries, at most 256"
	reads := matchCondition("m", "!('team' in vm.labels)")
	t.Run("Ignore", func(t *testing.T) {
		d := decide(setOf(t, c, newPolicy("labels", reads, ignoreErrors, allocation("'None'"))), in)
		if d.Reason == evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationAuto ||
			len(d.Trace.Ignored) != 1 || len(d.Trace.Errors) != 1 || d.Trace.Errors[0] != "policy labels: "+beyond {
			t.Errorf("decision = %+v, want labels passed over for %q and the default's Auto", d, beyond)
		}
	})
	t.Run("Audit", func(t *testing.T) {
		d := decide(setOf(t, c, newPolicy("labels", reads, audit, allocation("'None'"))), in)
		if d.Reason == evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationAuto ||
			len(d.Trace.Audit) != 1 || d.Trace.Audit[0].Error != "policy labels: "+beyond {
			t.Errorf("decision = %+v, want labels' record to hold %q and the default's Auto", d, beyond)
		}
	})
	t.Run("Fail", func(t *testing.T) {
		d := decide(setOf(t, c, newPolicy("labels", reads, allocation("'None'"))), in)
		if d.Reason != evaluator.ReasonPolicyError || d.Policy != "labels" || d.Message != "policy labels: "+beyond {
			t.Errorf("decision = %+v, want labels' PolicyError %q", d, beyond)
		}
	})
}
