package evaluator_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// layeredCase is a set of policies layered over the shipped default, an input, and the
// decision with its provenance.
type layeredCase struct {
	name     string
	policies []*v1alpha1.ClusterIPAMPolicy
	in       func() evaluator.Input
	want     evaluator.Decision // Allocation, Skip, Reason, Rule, Hotplug, Policy, Provenance compared
	// messageHas, when set, must be in the message.
	messageHas string
	// check, when set, inspects the rest of the decision (trace).
	check func(t *testing.T, d evaluator.Decision)
}

const builtin = evaluator.BuiltinPolicy

// running is pooledAuto on a running VM that just got the interface.
func running() evaluator.Input {
	in := pooledAuto()
	in.Change = evaluator.Change{Kind: evaluator.ChangeAdd, To: evaluator.ChangeState{Allocation: "Auto"}, VMRunning: true}
	return in
}

// atRestart is the shipped prod sample's hotplug: nothing to apply, or not running.
const atRestart = "change.kind == 'None' || !change.vmRunning"

func layeredCases() []layeredCase {
	tenantRule := skipRule("static-not-allowed", "interface.ipAddressName != ''", "StaticAddressNotAllowed", "",
		"'ipAddressName ' + interface.ipAddressName + ' is not allowed here'")
	return []layeredCase{
		{name: "hotplug-only over the default: the default decides the rest, the layer hotplug",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("prod", hotplug(atRestart))},
			in:       running,
			want: evaluator.Decision{Allocation: "Auto", Hotplug: false, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: "prod"}}},
		{name: "hotplug-only: a non-trivial hotplug allows an unchanged interface",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("prod", hotplug(atRestart))},
			in: func() evaluator.Input {
				in := running()
				in.Change.Kind, in.Change.From = evaluator.ChangeNone, in.Change.To
				return in
			},
			want: evaluator.Decision{Allocation: "Auto", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: "prod"}}},
		{name: "hotplug-only: the default's skip rules still apply",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("prod", hotplug(atRestart))},
			in: func() evaluator.Input {
				in := running()
				in.IPAddress.Allocated = false
				return in
			},
			want: evaluator.Decision{Allocation: "Auto", Skip: true, Reason: evaluator.ReasonIPAddressPending,
				Rule: "auto-pending", Hotplug: false, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Skip: builtin, Hotplug: "prod"}}},
		{name: "an added skip rule fires before the default's",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("tenant", tenantRule)},
			in: func() evaluator.Input {
				in := pooledStatic()
				in.IPAddress.Exists = false
				return in
			},
			want: evaluator.Decision{Allocation: "Static", Skip: true, Reason: "StaticAddressNotAllowed",
				Rule: "static-not-allowed", Hotplug: true, Policy: "tenant",
				Provenance: evaluator.Provenance{Allocation: builtin, Skip: "tenant", Hotplug: builtin}},
			messageHas: "ipAddressName web is not allowed here"},
		{name: "an added skip rule that does not hold lets the default's rules run",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("tenant", tenantRule)},
			in: func() evaluator.Input {
				in := pooledAuto()
				in.Network.Ready = false
				return in
			},
			want: evaluator.Decision{Allocation: "Auto", Skip: true, Reason: evaluator.ReasonNetworkNotReady,
				Rule: "network-not-ready", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Skip: builtin, Hotplug: builtin}}},
		{name: "a rule named like a default rule replaces it",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("lenient",
				skipRule("static-not-allocated", "allocation == 'Static' && !ipAddress.allocated && ipAddress.phase != 'Pending'",
					"IPAddressNotAllocated", "not allocated, and not pending either", ""))},
			in: func() evaluator.Input {
				in := pooledStatic()
				in.IPAddress.Allocated, in.IPAddress.Phase = false, "Pending"
				return in
			},
			// the replacement does not fire; the safety policy still refuses the address
			want: evaluator.Decision{Allocation: "Static", Skip: true, Reason: evaluator.ReasonIPAddressNotAllocated,
				Rule: "vmipam:static-not-allocated", Hotplug: true, Policy: evaluator.SafetyPolicy,
				Provenance: evaluator.Provenance{Allocation: builtin, Skip: evaluator.SafetyPolicy, Hotplug: builtin}},
			check: func(t *testing.T, d evaluator.Decision) {
				want := evaluator.Replacement{Rule: "static-not-allocated", Policy: builtin, By: "lenient"}
				if !slices.Contains(d.Trace.Replaced, want) {
					t.Errorf("Trace.Replaced = %+v, want %+v", d.Trace.Replaced, want)
				}
			}},
		{name: "a default rule disabled by name: ipAddressName on a pool-less network is L2-only",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("l2-ok", skipRule("address-on-pool-less-network", "false", "NoIPAMPool", "", ""))},
			in: func() evaluator.Input {
				in := pooledStatic()
				in.Network.IPAMEnabled, in.Network.Pool = false, evaluator.Ref{}
				return in
			},
			want: evaluator.Decision{Allocation: "None", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: builtin}}},
		{name: "without the disabling layer the same interface is skipped",
			in: func() evaluator.Input {
				in := pooledStatic()
				in.Network.IPAMEnabled, in.Network.Pool = false, evaluator.Ref{}
				return in
			},
			want: evaluator.Decision{Allocation: "None", Skip: true, Reason: evaluator.ReasonNoIPAMPool,
				Rule: "address-on-pool-less-network", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Skip: builtin, Hotplug: builtin}}},
		{name: "an allocation-only layer does not trip the default's static rules",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("l2-on-corp", allocation("'None'"))},
			in: func() evaluator.Input {
				in := pooledStatic()
				in.IPAddress = evaluator.IPAddress{Name: "web"} // missing: static-missing would fire for Static
				return in
			},
			want: evaluator.Decision{Allocation: "None", Hotplug: true, Policy: "l2-on-corp",
				Provenance: evaluator.Provenance{Allocation: "l2-on-corp", Hotplug: builtin}}},
		{name: "Pass leaves the allocation to the next policy that sets it",
			policies: []*v1alpha1.ClusterIPAMPolicy{
				layer("lab", priority(1), allocation("vm.labels.?tier.orValue('') == 'lab' ? 'None' : 'Pass'")),
				layer("static-everywhere", priority(2), allocation("interface.ipAddressName != '' ? 'Static' : 'Pass'")),
			},
			in: pooledAuto,
			want: evaluator.Decision{Allocation: "Auto", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: builtin}},
			check: func(t *testing.T, d evaluator.Decision) {
				if !slices.Equal(d.Trace.Passed, []string{"lab", "static-everywhere"}) {
					t.Errorf("Trace.Passed = %v, want [lab static-everywhere]", d.Trace.Passed)
				}
			}},
		{name: "a Pass-ing policy that does decide for other interfaces",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("lab", allocation("vm.labels.?tier.orValue('') == 'lab' ? 'None' : 'Pass'"))},
			in: func() evaluator.Input {
				in := pooledAuto()
				in.VM.Labels = map[string]string{"tier": "lab"}
				return in
			},
			want: evaluator.Decision{Allocation: "None", Hotplug: true, Policy: "lab",
				Provenance: evaluator.Provenance{Allocation: "lab", Hotplug: builtin}}},
		{name: "an Ignore layer that fails is passed over entirely, its other parts too",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("flaky", ignoreErrors, allocation("'None'"),
				skipRule("needs-label", "vm.labels['team'] == ''", "NoTeam", "", ""))},
			in: pooledAuto,
			want: evaluator.Decision{Allocation: "Auto", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: builtin}},
			check: func(t *testing.T, d evaluator.Decision) {
				if !slices.Equal(d.Trace.Ignored, []string{"flaky"}) || len(d.Trace.Errors) != 1 ||
					!strings.Contains(d.Trace.Errors[0], "policy flaky: spec.skipRules[0].expression: no such key: team") {
					t.Errorf("Ignored = %v Errors = %q, want flaky passed over with its error", d.Trace.Ignored, d.Trace.Errors)
				}
			}},
		{name: "a Fail layer that fails in a skip rule skips with PolicyError naming policy and field",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("strict",
				skipRule("needs-label", "vm.labels['team'] == ''", "NoTeam", "", ""))},
			in: pooledAuto,
			want: evaluator.Decision{Allocation: evaluator.AllocationUnknown, Skip: true, Reason: evaluator.ReasonPolicyError,
				Policy: "strict", Provenance: evaluator.Provenance{Skip: "strict"}},
			messageHas: "policy strict: spec.skipRules[0].expression: no such key: team"},
		{name: "an Audit layer records its layered would-be decision and decides nothing",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("audit-l2", audit, allocation("'None'"), hotplug("false"))},
			in:       pooledAuto,
			want: evaluator.Decision{Allocation: "Auto", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: builtin}},
			check: func(t *testing.T, d evaluator.Decision) {
				want := evaluator.AuditRecord{Policy: "audit-l2", Allocation: "None", Hotplug: false,
					Provenance: evaluator.Provenance{Allocation: "audit-l2", Hotplug: "audit-l2"}, Differs: true}
				if len(d.Trace.Audit) != 1 || d.Trace.Audit[0] != want {
					t.Errorf("Trace.Audit = %+v, want [%+v]", d.Trace.Audit, want)
				}
			}},
		{name: "each policy sees its own variables",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("mine", variable("static", "false"),
				skipRule("uses-own", "variables.static", "Never", "", ""))},
			in: pooledStatic,
			want: evaluator.Decision{Allocation: "Static", Hotplug: true, Policy: builtin,
				Provenance: evaluator.Provenance{Allocation: builtin, Hotplug: builtin}}},
		{name: "a removed interface is asked hotplug only",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("prod", hotplug(atRestart))},
			in: func() evaluator.Input {
				in := pooledAuto()
				in.Network = evaluator.Network{} // not looked up: no rule may skip a removal
				in.Interface.Index = -1          // the spec no longer names it
				in.Change = evaluator.Change{Kind: evaluator.ChangeRemove, From: evaluator.ChangeState{Allocation: "Auto"}, VMRunning: true}
				return in
			},
			want: evaluator.Decision{Allocation: "Auto", Hotplug: false, Provenance: evaluator.Provenance{Hotplug: "prod"}}},
		{name: "an interface the spec names that its decision detaches is decided in full, and hotplug sees the removal",
			policies: []*v1alpha1.ClusterIPAMPolicy{layer("prod", hotplug(atRestart))},
			in: func() evaluator.Input {
				in := pooledStatic()
				in.IPAddress.Exists = false // static-missing skips it
				in.Change = evaluator.Change{Kind: evaluator.ChangeRemove, From: evaluator.ChangeState{Allocation: "Static", IPAddressName: in.Interface.IPAddressName}, VMRunning: true}
				return in
			},
			want: evaluator.Decision{Allocation: "Static", Skip: true, Reason: evaluator.ReasonIPAddressNotFound, Hotplug: false,
				Policy: builtin, Rule: "static-missing", Provenance: evaluator.Provenance{Allocation: builtin, Skip: builtin, Hotplug: "prod"}}},
	}
}

func TestLayeredPolicies(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range layeredCases() {
		t.Run(tc.name, func(t *testing.T) {
			d := setOf(t, c, tc.policies...).Decide(context.Background(), tc.in(), evaluator.Options{Explain: true})
			got := evaluator.Decision{Allocation: d.Allocation, Skip: d.Skip, Reason: d.Reason, Rule: d.Rule,
				Hotplug: d.Hotplug, Policy: d.Policy, Provenance: d.Provenance}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decision = %+v\nwant       %+v\n(message %q, trace %+v)", got, tc.want, d.Message, d.Trace)
			}
			if !strings.Contains(d.Message, tc.messageHas) {
				t.Errorf("message = %q, want it to contain %q", d.Message, tc.messageHas)
			}
			if tc.check != nil {
				tc.check(t, d)
			}
		})
	}
}

// matchOutcome is how a policy's matchConditions come out.
type matchOutcome int

const (
	noMatch matchOutcome = iota
	failed
	matched
)

// TestMatchConditionsAsValidatingAdmissionPolicy: any false condition means no match,
// whatever errors the others raise, in any order; only errors and no false apply the
// failurePolicy.
func TestMatchConditionsAsValidatingAdmissionPolicy(t *testing.T) {
	c := newCompiler(t)
	const (
		errs      = "vm.labels['missing'] == ''"
		falseCond = "interface.index == 7"
		trueCond  = "true"
	)
	cases := []struct {
		name       string
		conditions []string
		fail       matchOutcome
	}{
		{"[error, false]: no match", []string{errs, falseCond}, noMatch},
		{"[false, error]: no match", []string{falseCond, errs}, noMatch},
		{"[true, error, false]: no match", []string{trueCond, errs, falseCond}, noMatch},
		{"[error, true]: failurePolicy", []string{errs, trueCond}, failed},
		{"[true, error]: failurePolicy", []string{trueCond, errs}, failed},
		{"[true, true]: match", []string{trueCond, trueCond}, matched},
	}
	for _, tc := range cases {
		for _, fp := range []v1alpha1.FailurePolicy{v1alpha1.FailurePolicyFail, v1alpha1.FailurePolicyIgnore} {
			t.Run(tc.name+" under "+string(fp), func(t *testing.T) {
				opts := []policyOption{allocation("'None'"), func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.FailurePolicy = fp }}
				for i, cond := range tc.conditions {
					opts = append(opts, matchCondition("c"+string(rune('a'+i)), cond))
				}
				d := decide(setOf(t, c, layer("p", opts...)), pooledAuto())
				want := evaluator.Provenance{Allocation: builtin, Hotplug: builtin}
				switch {
				case tc.fail == matched:
					want.Allocation = "p"
				case tc.fail == failed && fp == v1alpha1.FailurePolicyFail:
					want = evaluator.Provenance{Skip: "p"}
				}
				if d.Provenance != want {
					t.Errorf("provenance = %+v, want %+v (decision %+v)", d.Provenance, want, d)
				}
			})
		}
	}
}
