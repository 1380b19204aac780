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

func TestPoliciesAreOrderedByPriorityThenName(t *testing.T) {
	c := newCompiler(t)
	a := mustCompile(t, c, newPolicy("a", priority(20), allocation("'Static'")))
	b := mustCompile(t, c, newPolicy("b", priority(10), allocation("'None'")))
	z := mustCompile(t, c, newPolicy("z", priority(10), allocation("'Auto'")))
	builtin := mustCompile(t, c, newPolicy("builtin"))
	for _, order := range [][]*evaluator.Policy{{a, b, z}, {z, b, a}, {a, z, b}, {b, a, z}} {
		set := evaluator.NewSet(order, builtin)
		if got, want := set.Policies(), []string{"b", "z", "a"}; !slices.Equal(got, want) {
			t.Errorf("Policies() = %v, want %v (listed as %v)", got, want, names(order))
		}
		if d := decide(set, pooledAuto()); d.Policy != "b" || d.Allocation != evaluator.AllocationNone {
			t.Errorf("decided by %s (%s), want b (None), listed as %v", d.Policy, d.Allocation, names(order))
		}
	}
}

func names(ps []*evaluator.Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func TestFirstMatchingPolicyThatSetsAllocationDecidesIt(t *testing.T) {
	c := newCompiler(t)
	const b = evaluator.BuiltinPolicy
	cases := []struct {
		name     string
		policies []*v1alpha1.ClusterIPAMPolicy
		decider  string
		matched  []string
	}{
		{"a lower priority matching policy decides",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("late", priority(50)), newPolicy("early", priority(5))},
			"early", []string{"early", "late", b}},
		{"a policy whose vmSelector does not hold is passed over",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("web", priority(1), vmSelector(map[string]string{"app": "web"})),
				newPolicy("any", priority(2))},
			"any", []string{"any", b}},
		{"a policy whose namespaceSelector holds decides",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("prod", priority(1), namespaceSelector(map[string]string{"env": "prod"})),
				newPolicy("any", priority(2))},
			"prod", []string{"prod", "any", b}},
		{"a policy for another network type is passed over",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("ns-nets", priority(1), networks(v1alpha1.NetworkSelector{Type: "Network"})),
				newPolicy("any", priority(2))},
			"any", []string{"any", b}},
		{"a policy for any network of the type matches",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("cluster-nets", priority(1), networks(v1alpha1.NetworkSelector{Type: "ClusterNetwork"}))},
			"cluster-nets", []string{"cluster-nets", b}},
		{"a policy for another network name is passed over",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("shared", priority(1),
				networks(v1alpha1.NetworkSelector{Type: "ClusterNetwork", Name: "shared"}),
			)},
			b, []string{b}},
		{"a policy whose matchCondition is false is passed over",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("second-nic", priority(1), matchCondition("m", "interface.index == 2"))},
			b, []string{b}},
		{"all matchConditions must hold",
			[]*v1alpha1.ClusterIPAMPolicy{newPolicy("both", priority(1),
				matchCondition("pooled", "network.ipamEnabled"), matchCondition("first", "interface.index == 1"))},
			"both", []string{"both", b}},
		{"a matching policy without allocation leaves it to the next",
			[]*v1alpha1.ClusterIPAMPolicy{layer("hotplug-only", priority(1), hotplug("true")), newPolicy("any", priority(2))},
			"any", []string{"hotplug-only", "any", b}},
		{"no match leaves the decision to the built-in default",
			nil, b, []string{b}},
	}
	in := pooledAuto()
	in.Namespace.Labels = map[string]string{"env": "prod"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := setOf(t, c, tc.policies...).Decide(context.Background(), in, evaluator.Options{Explain: true})
			if d.Policy != tc.decider || d.Provenance.Allocation != tc.decider || !slices.Equal(d.Trace.Matched, tc.matched) {
				t.Errorf("policy = %q allocation by %q matched = %v, want %q %v",
					d.Policy, d.Provenance.Allocation, d.Trace.Matched, tc.decider, tc.matched)
			}
		})
	}
}

func TestAuditNeverDecides(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		name  string
		audit *v1alpha1.ClusterIPAMPolicy
		want  evaluator.AuditRecord
	}{
		{"a matching Audit policy records its would-be decision",
			newPolicy("watch", audit, priority(1), allocation("'None'"),
				skipRule("outside", "!cidr('192.168.0.0/16').containsIP(ipAddress.address)", "OutsideRange", "", "")),
			evaluator.AuditRecord{Policy: "watch", Allocation: evaluator.AllocationNone, Skip: true,
				Reason: "OutsideRange", Message: "OutsideRange", Rule: "outside", Hotplug: true,
				Provenance: evaluator.Provenance{Allocation: "watch", Skip: "watch", Hotplug: evaluator.BuiltinPolicy}, Differs: true}},
		{"a failing Audit policy records its error, even under Fail",
			newPolicy("broken", audit, priority(1), allocation("vm.labels['missing']")),
			evaluator.AuditRecord{Policy: "broken",
				Error: "policy broken: spec.allocation.expression: no such key: missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(setOf(t, c, tc.audit, newPolicy("enforce", priority(2))), pooledAuto())
			if d.Policy != "enforce" || d.Skip || d.Allocation != evaluator.AllocationAuto {
				t.Errorf("decision = %+v, want the Enforce policy's Auto", d)
			}
			if len(d.Trace.Audit) != 1 || !reflect.DeepEqual(d.Trace.Audit[0], tc.want) {
				t.Errorf("Audit = %+v, want [%+v]", d.Trace.Audit, tc.want)
			}
		})
	}
}

func TestFailurePolicy(t *testing.T) {
	c := newCompiler(t)
	broken := func(opts ...policyOption) *v1alpha1.ClusterIPAMPolicy {
		return newPolicy("broken", append(opts, priority(1), matchCondition("m", "int(vm.name) > 0"))...)
	}
	const wantErr = "policy broken: spec.matchConditions[0].expression: type conversion error"
	cases := []struct {
		name string
		p    *v1alpha1.ClusterIPAMPolicy
		want evaluator.Decision // Allocation, Skip, Reason, Policy compared
	}{
		{"Fail skips the interface with PolicyError",
			broken(), evaluator.Decision{Allocation: evaluator.AllocationUnknown, Skip: true,
				Reason: evaluator.ReasonPolicyError, Policy: "broken"}},
		{"Ignore passes the policy over",
			broken(ignoreErrors), evaluator.Decision{Allocation: evaluator.AllocationAuto, Policy: "next"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(setOf(t, c, tc.p, newPolicy("next", priority(2))), pooledAuto())
			if d.Allocation != tc.want.Allocation || d.Skip != tc.want.Skip || d.Reason != tc.want.Reason ||
				d.Policy != tc.want.Policy {
				t.Errorf("decision = %+v, want %+v", d, tc.want)
			}
			if len(d.Trace.Errors) != 1 || !strings.HasPrefix(d.Trace.Errors[0], wantErr) {
				t.Errorf("Trace.Errors = %q, want one starting %q", d.Trace.Errors, wantErr)
			}
			if d.Skip && !strings.HasPrefix(d.Message, wantErr) {
				t.Errorf("message = %q, want it to name the policy and expression", d.Message)
			}
		})
	}
}

func TestAnErrorNeverYieldsAnAllocation(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		name string
		opt  policyOption
		path string
	}{
		{"in a matchCondition", matchCondition("m", "vm.labels['missing'] == ''"), "spec.matchConditions[0].expression"},
		{"in a variable", func(p *v1alpha1.ClusterIPAMPolicy) {
			variable("n", "int(vm.name)")(p)
			allocation("variables.n > 0 ? 'Auto' : 'None'")(p)
		}, "spec.variables[0].expression"},
		{"an allocation outside the enum at run time", allocation("dyn(vm.name)"), "spec.allocation.expression"},
		{"in a skip rule", skipRule("r", "1 / (interface.index - 1) == 0", "Never", "", ""), "spec.skipRules[0].expression"},
		{"in hotplug", hotplug("dyn(vm.name)"), "spec.hotplug.expression"},
		{"in a skip rule after a dyn allocation", func(p *v1alpha1.ClusterIPAMPolicy) {
			allocation("dyn('Static')")(p)
			skipRule("r", "dyn(vm.name)", "Never", "", "")(p)
		}, "spec.skipRules[0].expression"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(setOf(t, c, newPolicy("p", tc.opt)), pooledAuto())
			if d.Allocation != evaluator.AllocationUnknown || !d.Skip || d.Reason != evaluator.ReasonPolicyError {
				t.Errorf("decision = %+v, want a PolicyError skip with AllocationUnknown", d)
			}
			if want := "policy p: " + tc.path + ": "; !strings.HasPrefix(d.Message, want) {
				t.Errorf("message = %q, want it to start with %q", d.Message, want)
			}
		})
	}
}

func TestBuiltinThatDoesNotMatchIsAnError(t *testing.T) {
	c := newCompiler(t)
	set := evaluator.NewSet(nil, mustCompile(t, c, newPolicy("builtin", matchCondition("never", "false"))))
	d := decide(set, pooledAuto())
	if d.Allocation != evaluator.AllocationUnknown || d.Reason != evaluator.ReasonPolicyError ||
		d.Policy != evaluator.BuiltinPolicy || !strings.Contains(d.Message, "does not match") {
		t.Errorf("decision = %+v, want a PolicyError from the built-in policy", d)
	}
}

func TestSkipRules(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		name    string
		opts    []policyOption
		rule    string
		reason  evaluator.Reason
		message string
	}{
		{"no rule holds", []policyOption{skipRule("r", "false", "Never", "", "")}, "", "", ""},
		{"the first rule that holds wins", []policyOption{
			skipRule("first", "false", "First", "", ""),
			skipRule("second", "true", "Second", "static", "'from ' + vm.name"),
			skipRule("third", "true", "Third", "", ""),
		}, "second", "Second", "from vm-a"},
		{"the static message is used without a messageExpression",
			[]policyOption{skipRule("r", "true", "Static", "a static message", "")}, "r", "Static", "a static message"},
		{"the reason is the message when there is none",
			[]policyOption{skipRule("r", "true", "Bare", "", "")}, "r", "Bare", "Bare"},
		{"a broken messageExpression falls back to the static message and says so",
			[]policyOption{skipRule("r", "true", "Broken", "the fallback", "vm.labels['missing']")}, "r", "Broken",
			"the fallback (messageExpression failed: policy p: spec.skipRules[0].messageExpression: no such key: missing)"},
		{"a broken messageExpression without a message falls back to the reason",
			[]policyOption{skipRule("r", "true", "Broken", "", "dyn(interface.index)")}, "r", "Broken",
			"Broken (messageExpression failed: policy p: spec.skipRules[0].messageExpression: evaluated to 1 of type int, not a string)"},
		{"an empty messageExpression result falls back",
			[]policyOption{skipRule("r", "true", "Empty", "static", "' '")}, "r", "Empty",
			"static (messageExpression failed: policy p: spec.skipRules[0].messageExpression: evaluated to an empty message)"},
		{"an oversized messageExpression result falls back",
			[]policyOption{skipRule("r", "true", "Huge", "static", "vm.annotations['big']")}, "r", "Huge",
			"static (messageExpression failed: policy p: spec.skipRules[0].messageExpression: message of 6000 bytes exceeds the limit of 5120)"},
	}
	in := pooledAuto()
	in.VM.Annotations = map[string]string{"big": strings.Repeat("x", 6000)}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decide(setOf(t, c, newPolicy("p", tc.opts...)), in)
			if d.Skip != (tc.rule != "") || d.Rule != tc.rule || d.Reason != tc.reason || d.Message != tc.message {
				t.Errorf("skip = %v rule = %q reason = %q message = %q\nwant rule %q reason %q message %q",
					d.Skip, d.Rule, d.Reason, d.Message, tc.rule, tc.reason, tc.message)
			}
			if d.Allocation != evaluator.AllocationAuto {
				t.Errorf("allocation = %q, want the policy's Auto: a skip keeps the allocation", d.Allocation)
			}
			fellBack := strings.Contains(tc.message, "messageExpression failed")
			if fellBack != (len(d.Trace.Errors) == 1) {
				t.Errorf("Trace.Errors = %q, want the messageExpression error there iff it fell back", d.Trace.Errors)
			}
		})
	}
}

func TestHotplug(t *testing.T) {
	c := newCompiler(t)
	stoppedOnly := hotplug("!change.vmRunning")
	cases := []struct {
		name    string
		opts    []policyOption
		running bool
		want    bool
	}{
		{"absent means allowed", nil, true, true},
		{"an expression decides: running VM", []policyOption{stoppedOnly}, true, false},
		{"an expression decides: stopped VM", []policyOption{stoppedOnly}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := pooledAuto()
			in.Change = evaluator.Change{Kind: evaluator.ChangeAdd, VMRunning: tc.running}
			if d := decide(setOf(t, c, newPolicy("p", tc.opts...)), in); d.Hotplug != tc.want {
				t.Errorf("hotplug = %v, want %v", d.Hotplug, tc.want)
			}
		})
	}
}

func TestTrace(t *testing.T) {
	c := newCompiler(t)
	p := newPolicy("p", priority(2),
		variable("name", "vm.name"), variable("pooled", "network.ipamEnabled"),
		variable("index", "interface.index"), variable("holders", "holders.vms"),
		variable("labels", "vm.labels"), variable("pool", "network.pool"),
		variable("unused", "vm.uid"),
		matchCondition("m", "variables.pooled && variables.index == 1"),
		allocation("variables.holders.size() == 2 && variables.labels.size() == 2 && variables.pool.name != '' ? 'Auto' : 'None'"),
		skipRule("r", "true", "Always", "", "'skip ' + variables.name"))
	failing := newPolicy("failing", priority(1), ignoreErrors, variable("n", "vm.name"),
		matchCondition("m", "variables.n.size() > 0 && int(variables.n) > 0"))
	in := pooledAuto()
	in.VM.Labels = map[string]string{"tier": "web", "app": "shop"}
	in.Holders.VMs = []string{"vm-b", "vm-c"}

	d := explain(setOf(t, c, p, failing), in)
	want := map[string]map[string]string{"p": {
		"name": `"vm-a"`, "pooled": "true", "index": "1", "holders": `["vm-b", "vm-c"]`,
		"labels": `{"app": "shop", "tier": "web"}`, "pool": `{"kind":"ClusterIPAddressPool","name":"corp-pool"}`,
	}, "failing": {"n": `"vm-a"`}}
	if !reflect.DeepEqual(d.Trace.Variables, want) {
		t.Errorf("Variables = %v\nwant        %v", d.Trace.Variables, want)
	}
	if !slices.Equal(d.Trace.Matched, []string{"p", evaluator.BuiltinPolicy}) || d.Policy != "p" || d.Rule != "r" ||
		!slices.Equal(d.Trace.Ignored, []string{"failing"}) {
		t.Errorf("policy = %q rule = %q matched = %v ignored = %v, want p, r, [p builtin:default], [failing]",
			d.Policy, d.Rule, d.Trace.Matched, d.Trace.Ignored)
	}
	if wantErr := `policy failing: spec.matchConditions[0].expression: type conversion error`; len(d.Trace.Errors) != 1 ||
		!strings.HasPrefix(d.Trace.Errors[0], wantErr) {
		t.Errorf("Errors = %q, want one starting %q", d.Trace.Errors, wantErr)
	}
	if d.Cost <= 0 {
		t.Errorf("cost = %d, want the cost of every expression evaluated", d.Cost)
	}
}

func TestTraceKeepsVariablesOfAFailedPolicy(t *testing.T) {
	p := newPolicy("p", variable("name", "vm.name"), variable("n", "int(variables.name)"),
		allocation("variables.n > 0 ? 'Auto' : 'None'"))
	d := explain(setOf(t, newCompiler(t), p), pooledAuto())
	if d.Reason != evaluator.ReasonPolicyError || !reflect.DeepEqual(d.Trace.Variables, map[string]map[string]string{"p": {"name": `"vm-a"`}}) {
		t.Errorf("reason = %q variables = %v, want PolicyError with name=\"vm-a\"", d.Reason, d.Trace.Variables)
	}
	if want := "policy p: spec.variables[1].expression: "; !strings.HasPrefix(d.Message, want) {
		t.Errorf("message = %q, want the failing variable's path %q", d.Message, want)
	}
}

func TestDecideIsDeterministic(t *testing.T) {
	c := newCompiler(t)
	set := setOf(t, c,
		newPolicy("audit", audit, priority(1), variable("labels", "vm.labels"), variable("ns", "namespaceObject.labels"),
			allocation("variables.labels.size() + variables.ns.size() > 0 ? 'Auto' : 'None'")),
		newPolicy("ignored", ignoreErrors, priority(2), matchCondition("m", "vm.labels['missing'] == ''")),
		newPolicy("p", priority(3), variable("m", "vm.labels.map(k, k + '=' + vm.labels[k])"),
			skipRule("r", "variables.m.size() > 2", "ManyLabels", "", "variables.m.join(',')")))
	in := pooledAuto()
	in.VM.Labels = map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}
	in.Namespace.Labels = map[string]string{"x": "1", "y": "2", "z": "3"}
	first := set.Decide(context.Background(), in, evaluator.Options{Explain: true})
	for range 20 {
		if again := set.Decide(context.Background(), in, evaluator.Options{Explain: true}); !reflect.DeepEqual(first, again) {
			t.Fatalf("decisions differ:\n%+v\n%+v", first, again)
		}
	}
}

func TestNilMapsAndListsAreEmpty(t *testing.T) {
	p := newPolicy("p", matchCondition("empty",
		"vm.labels.size() == 0 && vm.annotations.size() == 0 && network.labels.size() == 0 && "+
			"namespaceObject.labels.size() == 0 && holders.vms.size() == 0 && !('x' in vm.labels)"))
	d := decide(setOf(t, newCompiler(t), p), evaluator.Input{})
	if d.Provenance.Allocation != "p" || d.Allocation != evaluator.AllocationAuto {
		t.Errorf("decision = %+v, want p to match a zero Input", d)
	}
}

// What a policy's mode or failurePolicy kept from deciding is in Trace.Failures, one per
// policy, without Options.Explain, for the controller to count and show (issue #29): an
// Ignore policy passed over, an Audit policy whose matchConditions or record failed; and an
// Audit record that would decide otherwise than the decision says so (Differs).
func TestFailuresAndDifferingAuditRecordsAreCountable(t *testing.T) {
	c := newCompiler(t)
	set := setOf(t, c,
		layer("ignored", priority(1), ignoreErrors, hotplug("vm.labels['missing'] == 'x'")),
		layer("broken-audit", priority(2), audit, matchCondition("m", "vm.labels['missing'] == 'x'"), hotplug("false")),
		layer("audit-none", priority(3), audit, allocation("'None'")),
		layer("audit-same", priority(4), audit, allocation("'Auto'")))
	d := decide(set, pooledAuto())
	if d.Reason == evaluator.ReasonPolicyError || d.Allocation != evaluator.AllocationAuto {
		t.Fatalf("decision = %s %q, want the built-in default's Auto", d.Reason, d.Message)
	}
	want := []evaluator.PolicyFailure{
		{Policy: "broken-audit", Mode: v1alpha1.PolicyModeAudit, FailurePolicy: v1alpha1.FailurePolicyFail,
			Field: "spec.matchConditions[0].expression", Error: "no such key: missing"},
		{Policy: "ignored", Mode: v1alpha1.PolicyModeEnforce, FailurePolicy: v1alpha1.FailurePolicyIgnore,
			Field: "spec.hotplug.expression", Error: "no such key: missing"},
	}
	if !reflect.DeepEqual(d.Trace.Failures, want) {
		t.Errorf("Failures = %+v, want %+v", d.Trace.Failures, want)
	}
	differs := map[string]bool{}
	for _, r := range d.Trace.Audit {
		differs[r.Policy] = r.Differs
	}
	if !differs["audit-none"] || differs["audit-same"] || differs["broken-audit"] {
		t.Errorf("Differs = %v, want only audit-none's record to differ", differs)
	}
}
