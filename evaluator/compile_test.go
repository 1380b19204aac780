package evaluator_test

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func TestCompileRejects(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		name   string
		policy *v1alpha1.ClusterIPAMPolicy
		path   string // the one error's field path
		detail string // substring of the error
	}{
		{"a misspelled field name",
			newPolicy("p", skipRule("r", "!ipAddress.exist", "Missing", "", "")),
			"spec.skipRules[0].expression", "undefined field 'exist'"},
		{"a misspelled input variable",
			newPolicy("p", skipRule("r", "!ipAdress.exists", "Missing", "", "")),
			"spec.skipRules[0].expression", "undeclared reference to 'ipAdress'"},
		{"a wrong operand type",
			newPolicy("p", matchCondition("m", "interface.index == 'one'")),
			"spec.matchConditions[0].expression", "no matching overload for '_==_'"},
		{"arithmetic on a string",
			newPolicy("p", hotplug("vm.name + 1 == 'x'")),
			"spec.hotplug.expression", "no matching overload for '_+_'"},
		{"orValue on a non-optional",
			newPolicy("p", variable("zone", "vm.labels['zone'].orValue('none')")),
			"spec.variables[0].expression", "no matching overload for 'orValue'"},
		{"a non-bool matchCondition",
			newPolicy("p", matchCondition("m", "vm.name")),
			"spec.matchConditions[0].expression", "must evaluate to bool, but evaluates to string"},
		{"a non-bool skip rule",
			newPolicy("p", skipRule("r", "interface.index", "Odd", "", "")),
			"spec.skipRules[0].expression", "must evaluate to bool, but evaluates to int"},
		{"a non-bool hotplug",
			newPolicy("p", hotplug("'yes'")),
			"spec.hotplug.expression", "must evaluate to bool, but evaluates to string"},
		{"a non-string allocation",
			newPolicy("p", allocation("network.ipamEnabled")),
			"spec.allocation.expression", "must evaluate to string, but evaluates to bool"},
		{"a non-string messageExpression",
			newPolicy("p", skipRule("r", "true", "Always", "", "interface.index")),
			"spec.skipRules[0].messageExpression", "must evaluate to string, but evaluates to int"},
		{"an allocation literal outside the enum",
			newPolicy("p", allocation("'Dynamic'")),
			"spec.allocation.expression", `Unsupported value: "Dynamic"`},
		{"an allocation literal outside the enum in a conditional",
			newPolicy("p", allocation("network.ipamEnabled ? 'Auto' : 'L2'")),
			"spec.allocation.expression", `Unsupported value: "L2"`},
		{"a bad label selector",
			newPolicy("p", func(p *v1alpha1.ClusterIPAMPolicy) {
				p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: "Near", Values: []string{"prod"}}}}
			}),
			"spec.match.namespaceSelector", `"Near" is not a valid label selector operator`},
		{"a bad vm selector label value",
			newPolicy("p", vmSelector(map[string]string{"app": "not a label value"})),
			"spec.match.vmSelector", "a valid label must be"},
		{"a matchCondition name no qualified name nor identifier",
			newPolicy("p", matchCondition("team x", "true")),
			"spec.matchConditions[0].name", "must be a qualified name"},
		{"a matchCondition name ending in a hyphen",
			newPolicy("p", matchCondition("team-", "true")),
			"spec.matchConditions[0].name", "must be a qualified name"},
		{"a variable name that is a qualified name but no identifier",
			newPolicy("p", variable("team-x", "true"), matchCondition("m", "true")),
			"spec.variables[0].name", "must be a CEL identifier"},
		{"a policy that sets nothing",
			layer("p", matchCondition("m", "true")),
			"spec", "at least one of allocation, skipRules, hotplug"},
		{"a skip rule with a reserved name",
			newPolicy("p", skipRule("vmipam:static-missing", "false", "Off", "", "")),
			"spec.skipRules[0].name", "reserved for vmipam's safety rules"},
		{"the decided allocation in a variable",
			newPolicy("p", variable("static", "allocation == 'Static'")),
			"spec.variables[0].expression", "undeclared reference to 'allocation'"},
		{"the decided allocation in the allocation",
			newPolicy("p", allocation("allocation")),
			"spec.allocation.expression", "undeclared reference to 'allocation'"},
		{"the decided allocation in a matchCondition",
			newPolicy("p", matchCondition("m", "allocation == 'Auto'")),
			"spec.matchConditions[0].expression", "undeclared reference to 'allocation'"},
		{"Pass misspelled",
			newPolicy("p", allocation("'pass'")),
			"spec.allocation.expression", `Unsupported value: "pass"`},
		{"duplicate variable names",
			newPolicy("p", variable("a", "1"), variable("a", "2")),
			"spec.variables[1].name", "Duplicate value"},
		{"duplicate skip rule names",
			newPolicy("p", skipRule("r", "true", "One", "", ""), skipRule("s", "true", "Two", "", ""), skipRule("r", "false", "Three", "", "")),
			"spec.skipRules[2].name", `Duplicate value: "r"`},
		{"a variable referencing a later one",
			newPolicy("p", variable("a", "variables.b + 1"), variable("b", "1")),
			"spec.variables[0].expression", "undefined field 'b'"},
		{"a variable name that is not an identifier",
			newPolicy("p", variable("pool-name", "network.pool.name")),
			"spec.variables[0].name", "must be a CEL identifier"},
		{"a variable name that is a reserved word",
			newPolicy("p", variable("namespace", "vm.namespace")),
			"spec.variables[0].name", "reserved word"},
		{"namespace as a variable, which CEL reserves",
			newPolicy("p", matchCondition("m", "namespace.name == 'prod'")),
			"spec.matchConditions[0].expression", "reserved identifier: namespace"},
		{"an empty expression",
			newPolicy("p", allocation("")),
			"spec.allocation.expression", "Required value"},
		{"a syntax error",
			newPolicy("p", skipRule("r", "network.ready &&", "NotReady", "", "")),
			"spec.skipRules[0].expression", "Syntax error"},
		{"a bad regex literal",
			newPolicy("p", matchCondition("m", "vm.name.matches('[')")),
			"spec.matchConditions[0].expression", "matches(): pattern \"[\": error parsing regexp: missing closing ]"},
		{"a skip reason that is not CamelCase",
			newPolicy("p", skipRule("r", "true", "not-camel", "", "")),
			"spec.skipRules[0].reason", "must be CamelCase"},
		{"an unknown failurePolicy",
			newPolicy("p", func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.FailurePolicy = "ignore" }),
			"spec.failurePolicy", `Unsupported value: "ignore"`},
		{"an unknown mode",
			newPolicy("p", func(p *v1alpha1.ClusterIPAMPolicy) { p.Spec.Mode = "DryRun" }),
			"spec.mode", `Unsupported value: "DryRun"`},
		{"an unknown network type",
			newPolicy("p", networks(v1alpha1.NetworkSelector{Type: "Main"})),
			"spec.match.networks[0].type", `Unsupported value: "Main"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			compiled, errs := c.Compile(tc.policy, nil)
			if compiled != nil || len(errs) != 1 {
				t.Fatalf("Compile = %v, %v; want exactly one error at %s", compiled, errs, tc.path)
			}
			if errs[0].Field != tc.path || !strings.Contains(errs[0].Error(), tc.detail) {
				t.Errorf("error = %q at %s, want %q at %s", errs[0].Error(), errs[0].Field, tc.detail, tc.path)
			}
		})
	}
}

func TestCompileReportsAllErrorsTogether(t *testing.T) {
	p := newPolicy("p",
		variable("a", "vm.nam"),
		variable("a", "1"),
		matchCondition("m", "1"),
		allocation("'Bogus'"),
		skipRule("r0", "true", "Fine", "", ""),
		skipRule("r1", "ipAddress.adress == ''", "Typo", "", "1"),
		hotplug("change.kind"),
	)
	_, errs := newCompiler(t).Compile(p, nil)
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	want := []string{
		"spec.variables[0].expression", "spec.variables[1].name", "spec.matchConditions[0].expression",
		"spec.allocation.expression", "spec.skipRules[1].expression", "spec.skipRules[1].messageExpression",
		"spec.hotplug.expression",
	}
	if !slices.Equal(got, want) {
		t.Errorf("error paths = %q\nwant          %q\nerrors: %v", got, want, errs)
	}
}

func TestCompileToleratesSkipRuleNamesTheStoredVersionRepeats(t *testing.T) {
	c := newCompiler(t)
	stored := newPolicy("p", skipRule("r", "true", "One", "", ""), skipRule("r", "false", "Two", "", ""))
	if _, errs := c.Compile(stored, stored); len(errs) > 0 {
		t.Errorf("Compile(stored, stored) = %v, want a stored policy with a repeated name to keep compiling", errs)
	}
	updated := newPolicy("p", skipRule("r", "true", "One", "", ""), skipRule("r", "false", "Two", "", ""),
		skipRule("s", "true", "Three", "", ""), skipRule("s", "false", "Four", "", ""))
	_, errs := c.Compile(updated, stored)
	if len(errs) != 1 || errs[0].Field != "spec.skipRules[3].name" || errs[0].Type != field.ErrorTypeDuplicate {
		t.Errorf("Compile(updated, stored) = %v, want only the newly repeated name s at spec.skipRules[3].name", errs)
	}
}

func TestCompileAccepts(t *testing.T) {
	c := newCompiler(t)
	cases := []struct {
		name string
		opt  policyOption
	}{
		{"matchCondition names as ValidatingAdmissionPolicy accepts them", func(p *v1alpha1.ClusterIPAMPolicy) {
			for _, n := range []string{"only-pooled", "example.com/only.pooled", "_legacy_identifier", "Team1"} {
				matchCondition(n, "true")(p)
			}
		}},
		{"the cidr and ip libraries", skipRule("r",
			"isIP(ipAddress.address) && !cidr('10.0.0.0/8').containsIP(ip(ipAddress.address))", "Outside", "", "")},
		{"optional map lookups", variable("zone", "vm.labels[?'zone'].orValue('none')")},
		{"the strings library", matchCondition("m", "vm.name.lowerAscii().startsWith('web-')")},
		{"the sets library", matchCondition("m", "sets.contains(['a', 'b'], holders.vms)")},
		{"the format library", skipRule("r", "true", "Always", "",
			"'interface %d of %s'.format([interface.index, vm.name])")},
		{"the regex library", matchCondition("m", "vm.name.find('[0-9]+') != ''")},
		{"the quantity library", matchCondition("m", "quantity('1Gi').isGreaterThan(quantity('1Mi'))")},
		{"the lists library", matchCondition("m", "holders.vms.isSorted() || holders.vms.includes(vm.name)")},
		{"timestamps", matchCondition("m", "vm.creationTimestamp < timestamp('2030-01-01T00:00:00Z')")},
		{"variables of every kind", func(p *v1alpha1.ClusterIPAMPolicy) {
			for _, o := range []policyOption{
				variable("s", "vm.name"), variable("i", "interface.index"), variable("b", "network.ready"),
				variable("l", "holders.vms"), variable("m", "vm.labels"), variable("o", "network.pool"),
				matchCondition("m", "variables.s.size() + variables.i > 0 && variables.b && "+
					"variables.l.size() >= 0 && variables.m.size() >= 0 && variables.o.name == ''"),
			} {
				o(p)
			}
		}},
		{"string() of numbers, times and addresses in a message", skipRule("r", "true", "Always", "",
			"'nic ' + string(interface.index) + ' of ' + string(vm.name) + ' since ' + string(vm.creationTimestamp) + "+
				"' at ' + string(ip('10.0.0.1')) + ' in ' + string(cidr('10.0.0.0/8')) + ' ' + string(1.5) + string(true)")},
		{"join over a list made in a variable", func(p *v1alpha1.ClusterIPAMPolicy) {
			variable("pairs", "vm.labels.map(k, k + '=' + vm.labels[k])")(p)
			skipRule("r", "true", "Always", "", "variables.pairs.join(', ')")(p)
		}},
		{"a dyn allocation (checked when evaluated)", allocation("dyn(vm.labels['allocation'])")},
		{"Pass in an allocation", allocation("network.ipamEnabled ? 'Pass' : 'None'")},
		{"the decided allocation in skip rules, messages and hotplug", func(p *v1alpha1.ClusterIPAMPolicy) {
			skipRule("r", "allocation == 'Static'", "Static", "", "'decided ' + allocation")(p)
			hotplug("allocation != 'Auto'")(p)
		}},
		{"only hotplug", func(p *v1alpha1.ClusterIPAMPolicy) { noAllocation(p); hotplug("true")(p) }},
		{"only a skip rule", func(p *v1alpha1.ClusterIPAMPolicy) { noAllocation(p); skipRule("r", "false", "Never", "", "")(p) }},
		{"a comprehension over a bounded map", matchCondition("m",
			"vm.labels.all(a, namespaceObject.labels[?a].orValue('') != vm.labels[a])")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, errs := c.Compile(newPolicy("p", tc.opt), nil); len(errs) > 0 {
				t.Errorf("Compile: %v", errs.ToAggregate())
			}
		})
	}
}

func TestCompileDefaultsFailurePolicyAndMode(t *testing.T) {
	p := mustCompile(t, newCompiler(t), newPolicy("p", priority(7)))
	if p.FailurePolicy != v1alpha1.FailurePolicyFail || p.Mode != v1alpha1.PolicyModeEnforce ||
		p.Priority != 7 || p.Name != "p" || p.Generation != 1 {
		t.Errorf("compiled = %+v, want Fail, Enforce, priority 7, name p, generation 1", p)
	}
}
