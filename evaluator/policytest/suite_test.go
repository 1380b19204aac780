package policytest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/evaluator/policytest"
)

const suiteHeader = "apiVersion: cli.ipam.virtualization.deckhouse.io/v1alpha1\nkind: PolicyTest\n"

const testPolicy = `apiVersion: ipam.virtualization.deckhouse.io/v1alpha1
kind: ClusterIPAMPolicy
metadata: {name: only-web}
spec:
  priority: 1
  match: {vmSelector: {matchLabels: {app: web}}}
  allocation: {expression: "'None'"}
  skipRules:
  - {name: second, expression: "interface.index == 2", reason: SecondNIC, message: "no second NIC"}
`

func TestParseSuiteRejects(t *testing.T) {
	cases := []struct {
		name, suite, detail string
	}{
		{"a file of another kind", "apiVersion: v1\nkind: ConfigMap\ncases: []\n", "want cli.ipam"},
		{"an unknown field", suiteHeader + "cases:\n- name: a\n  expected: {skip: true}\n", `unknown field "expected"`},
		{"no cases", suiteHeader, "no cases"},
		{"a case without a name", suiteHeader + "cases:\n- expect: {skip: true}\n", "cases[0]: a name is required"},
		{"a case without expectations", suiteHeader + "cases:\n- name: a\n", `cases[0] "a": expect is empty`},
		{"a misspelled input field", suiteHeader + "cases:\n- name: a\n  input: {vm: {nmae: x}}\n  expect: {skip: true}\n",
			`input: unknown field "vm.nmae"`},
		{"a misspelled defaults field", suiteHeader + "defaults: {network: {ready: yes, pol: {}}}\ncases:\n- name: a\n  expect: {skip: true}\n",
			`input: unknown field "network.pol"`},
		{"a string where a number goes", suiteHeader + "cases:\n- name: a\n  input: {interface: {index: one}}\n  expect: {skip: true}\n",
			"input: interface.index: must be a number, not string"},
		{"a misspelled expectation", suiteHeader + "cases:\n- name: a\n  expect: {skip: true}\n- name: b\n  expect: {skp: true}\n",
			`cases[1] "b": unknown field "expect.skp"`},
		{"a misspelled expectation in a case without a name", suiteHeader + "cases:\n- expect: {skp: true}\n",
			`cases[0]: unknown field "expect.skp"`},
		{"an expectation of the wrong type", suiteHeader + "cases:\n- name: a\n  expect: {skip: nope}\n",
			`cases[0] "a": expect.skip: must be a bool, not string`},
		{"a misspelled allocation", suiteHeader + "cases:\n- name: a\n  expect: {allocation: Statc}\n",
			`cases[0] "a": expect.allocation: Unsupported value "Statc"`},
		{"a misspelled audit allocation", suiteHeader + "cases:\n- name: a\n  expect: {audit: {p: {allocation: auto}}}\n",
			`cases[0] "a": expect.audit.p.allocation: Unsupported value "auto"`},
		{"cases that are not a list", suiteHeader + "cases: {name: a}\n", "cases: must be a list, not object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := policytest.Parse([]byte(tc.suite))
			if err == nil || !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("Parse error = %v, want one containing %q", err, tc.detail)
			}
		})
	}
}

func TestCaseInputAppliesOverDefaults(t *testing.T) {
	s, err := policytest.Parse([]byte(suiteHeader + `
defaults:
  vm: {name: a, labels: {app: web, tier: front}}
  holders: {vms: [vm-x, vm-y]}
  interface: {index: 1, name: corp}
cases:
- name: merged
  input:
    vm: {labels: {tier: back}}
    holders: {vms: [vm-z]}
    interface: {index: 2}
  expect: {skip: false}
- name: cleared
  input: {vm: {labels: null}}
  expect: {skip: false}
`))
	if err != nil {
		t.Fatal(err)
	}
	merged, _ := s.CaseInput(0)
	if merged.VM.Name != "a" || merged.VM.Labels["app"] != "web" || merged.VM.Labels["tier"] != "back" ||
		len(merged.Holders.VMs) != 1 || merged.Holders.VMs[0] != "vm-z" || merged.Interface.Index != 2 ||
		merged.Interface.Name != "corp" {
		t.Errorf("merged input = %+v, want objects and maps merged, lists and scalars replaced", merged)
	}
	if cleared, _ := s.CaseInput(1); cleared.VM.Labels != nil || cleared.VM.Name != "a" {
		t.Errorf("cleared input = %+v, want labels cleared by null", cleared.VM)
	}
}

func TestRunSuiteReportsEveryFailedExpectation(t *testing.T) {
	fsys := fstest.MapFS{
		"policies/web.yaml": {Data: []byte(testPolicy)},
		"cases/web.yaml": {Data: []byte(suiteHeader + `
policies: [../policies/*.yaml]
defaults:
  vm: {name: web-1, labels: {app: web}}
  interface: {index: 2, type: ClusterNetwork, name: corp}
cases:
- name: passes
  expect: {allocation: None, skip: true, reason: SecondNIC, rule: second, policy: only-web, hotplug: true, messageContains: second NIC}
- name: fails
  expect: {allocation: Auto, skip: false, reason: Other, policy: default, messageContains: third, audit: {watcher: {skip: true}}}
`)},
	}
	suite, err := policytest.Load(fsys, "cases/web.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(suite.Loaded) != 1 || suite.Loaded[0].File != "policies/web.yaml" {
		t.Fatalf("Loaded = %+v, want only-web from policies/web.yaml", suite.Loaded)
	}
	results, err := policytest.Run(context.Background(), newCompiler(t), suite)
	if err != nil {
		t.Fatal(err)
	}
	if !results[0].Passed() || results[0].String() != "PASS passes (decided by only-web)" {
		t.Errorf("first case: %s", results[0])
	}
	want := `FAIL fails
    allocation: got "None", want "Auto"
    skip: got "true", want "false"
    reason: got "SecondNIC", want "Other"
    policy: got "only-web", want "default"
    message: got "no second NIC", want it to contain "third"
    audit[watcher]: no record, want one`
	if got := results[1].String(); got != want {
		t.Errorf("second case:\n%s\nwant\n%s", got, want)
	}
}

func TestRunSuiteChecksAuditRecords(t *testing.T) {
	audit := strings.Replace(strings.Replace(testPolicy, "name: only-web", "name: watcher", 1),
		"priority: 1", "priority: 1\n  mode: Audit", 1)
	fsys := fstest.MapFS{
		"watcher.yaml": {Data: []byte(audit)},
		"suite.yaml": {Data: []byte(suiteHeader + `
policies: [watcher.yaml]
defaults: {vm: {labels: {app: web}}, interface: {index: 2}}
cases:
- name: recorded
  expect: {policy: "builtin:default", audit: {watcher: {allocation: None, skip: true, reason: SecondNIC}}}
- name: recorded differently
  expect: {audit: {watcher: {skip: false}}}
`)},
	}
	suite, err := policytest.Load(fsys, "suite.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := policytest.Run(context.Background(), newCompiler(t), suite)
	if err != nil {
		t.Fatal(err)
	}
	if !results[0].Passed() {
		t.Errorf("first case: %s", results[0])
	}
	if got, want := results[1].String(), "FAIL recorded differently\n    audit[watcher].skip: got \"true\", want \"false\""; got != want {
		t.Errorf("second case: %s\nwant %s", got, want)
	}
}

func TestRunSuiteNamesPoliciesThatDoNotCompile(t *testing.T) {
	broken := strings.Replace(testPolicy, "interface.index == 2", "interface.indx == 2", 1)
	fsys := fstest.MapFS{
		"p.yaml":     {Data: []byte(broken)},
		"suite.yaml": {Data: []byte(suiteHeader + "policies: [p.yaml]\ncases:\n- {name: a, expect: {skip: false}}\n")},
	}
	suite, err := policytest.Load(fsys, "suite.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = policytest.Run(context.Background(), newCompiler(t), suite)
	if err == nil || !strings.Contains(err.Error(), "p.yaml: policy only-web: spec.skipRules[0].expression") {
		t.Errorf("Run error = %v, want it to name the file, the policy and the field path", err)
	}
}

func TestLoadSuiteRejectsMissingPolicyFiles(t *testing.T) {
	fsys := fstest.MapFS{"suite.yaml": {Data: []byte(suiteHeader + "policies: [none/*.yaml]\ncases:\n- {name: a, expect: {skip: false}}\n")}}
	if _, err := policytest.Load(fsys, "suite.yaml", nil); err == nil || !strings.Contains(err.Error(), "none/*.yaml: no such file") {
		t.Errorf("Load error = %v, want the missing pattern named", err)
	}
}

// A case that no policy of the suite matched passes only when it says so: before, it printed
// PASS whenever the built-in default happened to agree.
func TestRunSuiteFailsACaseNoSuitePolicyMatchedUnlessExpected(t *testing.T) {
	fsys := fstest.MapFS{
		"policies/web.yaml": {Data: []byte(testPolicy)},
		"cases/web.yaml": {Data: []byte(suiteHeader + `
policies: [../policies/*.yaml]
defaults:
  vm: {name: db-1, labels: {app: db}}
  interface: {index: 1, type: ClusterNetwork, name: corp}
cases:
- name: silently default
  expect: {skip: true}
- name: meant
  expect: {skip: true, noPolicyMatched: true}
- name: wrongly expected
  input: {vm: {labels: {app: web}}}
  expect: {noPolicyMatched: true}
`)},
	}
	suite, err := policytest.Load(fsys, "cases/web.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := policytest.Run(context.Background(), newCompiler(t), suite)
	if err != nil {
		t.Fatal(err)
	}
	if results[0].Passed() || !strings.Contains(results[0].String(), "noPolicyMatched: no policy of the suite matched") {
		t.Errorf("first case: %s, want a failure naming noPolicyMatched", results[0])
	}
	if !results[1].Passed() || !strings.HasPrefix(results[1].String(), "PASS meant (decided by builtin:") {
		t.Errorf("second case: %s, want PASS decided by a built-in policy", results[1])
	}
	if results[2].Passed() || !strings.Contains(results[2].String(), "noPolicyMatched: got false, want true") {
		t.Errorf("third case: %s, want noPolicyMatched to fail", results[2])
	}
}

// A case whose input is beyond the bounds says so: before, `ipamctl test` reported "no policy
// of the suite matched (the built-in default decided)" for it.
func TestRunSuiteNamesAnInputBeyondTheBounds(t *testing.T) {
	labels := make([]string, 257)
	for i := range labels {
		labels[i] = fmt.Sprintf("l%d: v", i)
	}
	fsys := fstest.MapFS{
		"policies/labels.yaml": {Data: []byte(`apiVersion: ipam.virtualization.deckhouse.io/v1alpha1
kind: ClusterIPAMPolicy
metadata: {name: labels}
spec:
  matchConditions: [{name: team, expression: "'team' in vm.labels"}]
  allocation: {expression: "'None'"}
`)},
		"cases/labels.yaml": {Data: []byte(suiteHeader + `
policies: [../policies/*.yaml]
cases:
- name: many labels
  input:
    vm: {name: db-1, labels: {` + strings.Join(labels, ", ") + `}}
    interface: {index: 1, type: ClusterNetwork, name: corp}
  expect: {allocation: None}
`)},
	}
	suite, err := policytest.Load(fsys, "cases/labels.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := policytest.Run(context.Background(), newCompiler(t), suite)
	if err != nil {
		t.Fatal(err)
	}
	got := results[0].String()
	if results[0].Passed() || !strings.Contains(got, "input is beyond the bounds") || strings.Contains(got, "noPolicyMatched") {
		t.Errorf("result = %s, want a failure naming the input beyond the bounds, not noPolicyMatched", got)
	}
}

// A case whose evaluation failed (a PolicyError: here the deadline, as under load) is reported
// as that error of the suite's policy: before, `ipamctl test` reported an abandoned evaluation
// (a call that outran the deadline and its grace) as "no policy of the suite matched (the
// built-in default decided)", its decision having no trace of what matched.
func TestRunSuiteReportsAPolicyErrorAsSuch(t *testing.T) {
	long, needle := strings.Repeat("a", 200_000), strings.Repeat("a", 2_000)+"b"
	fsys := fstest.MapFS{
		"policies/slow.yaml": {Data: []byte(`apiVersion: ipam.virtualization.deckhouse.io/v1alpha1
kind: ClusterIPAMPolicy
metadata: {name: slow}
spec:
  allocation: {expression: "'Auto'"}
  skipRules:
  - {name: loop, reason: Slow, expression: "lists.range(1000000).exists(i, vm.name == 'x' + string(i))"}
  - {name: search, reason: Slow, expression: "vm.annotations['a'].indexOf(vm.annotations['b']) >= 0"}
`)},
		"cases/slow.yaml": {Data: []byte(suiteHeader + `
policies: [../policies/*.yaml]
cases:
- name: slow
  input:
    vm: {name: db-1, annotations: {a: ` + long + `, b: ` + needle + `}}
    interface: {index: 1, type: ClusterNetwork, name: corp}
  expect: {skip: false}
`)},
	}
	suite, err := policytest.Load(fsys, "cases/slow.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		frequency uint
	}{
		// A million iterations (~0.3 s) outrun the deadline (50 ms), checked every iteration.
		{"the deadline, checked", 1},
		// Unchecked, the iterations and the search (~400 million comparisons, one call) outrun
		// the deadline and its grace (12.5 ms), and the evaluation is abandoned.
		{"an abandoned evaluation", 10_000_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compilerWith(t, evaluator.Limits{Deadline: 50 * time.Millisecond, CheckFrequency: tc.frequency, ComprehensionRange: 1e12,
				StaticCostLimit: 1e12, PerCallCostLimit: 1e12, InterfaceCostBudget: 1e12, TrialCostBudget: 1e12})
			results, err := policytest.Run(context.Background(), c, suite)
			if err != nil {
				t.Fatal(err)
			}
			got := results[0].String()
			if results[0].Decision.Reason != evaluator.ReasonPolicyError || strings.Contains(got, "noPolicyMatched") ||
				!strings.Contains(got, "the evaluation failed (PolicyError): policy slow") {
				t.Errorf("result = %s, want the PolicyError reported, not noPolicyMatched", got)
			}
		})
	}
}
