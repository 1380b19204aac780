package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// fileWriter returns a function that writes body to the file name in dir and returns its path.
func fileWriter(t *testing.T, dir string) func(name, body string) string {
	return func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// run runs ipamctl in-process and returns its exit code, output and error output.
func run(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), name, args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

func TestEvaluateOffline(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "evaluate", "-f", "testdata/vm.yaml", "-O", "testdata/world.yaml", "--assume-ready")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"VirtualMachine demo/web (does not exist yet); policies (shipped): default",
		"ClusterNetwork/corp         Auto",
		"ClusterNetwork/corp-static  Static      yes       web-ip",
		"create IPAddress web-cn-corp-",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEvaluateJSONWithCandidatePolicies(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "evaluate", "-f", "testdata/vm.yaml", "-O", "testdata/world.yaml",
		"-p", "testdata/static-not-allowed.yaml", "--assume-ready", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	ev := &dryrunv1.Evaluation{}
	if err := json.Unmarshal([]byte(out), ev); err != nil {
		t.Fatal(err)
	}
	if ev.Kind != dryrunv1.Kind || ev.APIVersion != dryrunv1.SchemeGroupVersion.String() {
		t.Errorf("printed %s %s, want an Evaluation as the API server answers", ev.APIVersion, ev.Kind)
	}
	res := ev.Status
	if d := res.Interfaces[1].Decision; d.Policy != "static-not-allowed" || d.Reason != "StaticNotAllowed" || res.Policies.Source != dryrunv1.PoliciesRequest {
		t.Errorf("second interface decided %+v, want StaticNotAllowed by the candidate policy", d)
	}
}

func TestEvaluateTableShowsWhatAuditPoliciesWouldDecide(t *testing.T) {
	world, err := os.ReadFile("testdata/world.yaml")
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "world.yaml")
	if err := os.WriteFile(outside, []byte(strings.Replace(string(world), "10.10.0.50", "192.168.1.5", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "ipamctl", "evaluate", "-f", "testdata/vm.yaml", "-O", outside, "--assume-ready",
		"-p", "../../../samples/policies/audit-static-outside-corporate-range.yaml", "-p", "../../../policies/default.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	audit := regexp.MustCompile(`(?m)^Audit-mode policies \(would decide, not applied\):\nINTERFACE\s+POLICY\s+ALLOCATION\s+SKIP\s+RULE\s+REASON\n` +
		`ClusterNetwork/corp-static\s+audit-static-outside-corporate-range\s+Static\s+yes\s+outside-corporate-range\s+StaticOutsideCorporateRange\n\n`)
	if !audit.MatchString(out) {
		t.Errorf("output lacks the Audit policy's would-be skip of corp-static:\n%s", out)
	}
	if !regexp.MustCompile(`ClusterNetwork/corp-static\s+Static\s+yes\s+web-ip\s+192.168.1.5\s+-\s+yes\s+default\s+-\s+default\n`).MatchString(out) {
		t.Errorf("the interface table should still show the default's decision:\n%s", out)
	}
}

// layeredArgs evaluate the running production VM of testdata/layered with the shipped samples
// layered over the default policy.
var layeredArgs = []string{"evaluate", "-f", "testdata/layered/vm.yaml", "-O", "testdata/layered/world.yaml", "--assume-ready",
	"-p", "../../../policies/default.yaml", "-p", "../../../samples/policies/prod-changes-at-restart.yaml",
	"-p", "../../../samples/policies/tenant-shared-network.yaml"}

func TestEvaluateTableShowsWhichPolicyDecidedEachPart(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", layeredArgs...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, row := range []string{
		`INTERFACE\s+ALLOCATION\s+ATTACHED\s+IPADDRESS\s+ADDRESS\s+REASON\s+HOTPLUG\s+ALLOCATED BY\s+SKIPPED BY\s+HOTPLUG BY\n`,
		// Refused and not running: nothing changes for the guest (change None), so prod's hotplug
		// has nothing to hold (issue #29, point 1: hotplug guards the outcome).
		`ClusterNetwork/shared\s+Static\s+no\s+mine\s+-\s+StaticAddressNotAllowed\s+yes\s+default\s+tenant-shared-network/static-not-allowed\s+prod-changes-at-restart\n`,
		// The running pod does not have corp and may not get it before a restart: not attached
		// (vmipam issue 10: NetworkReady never says attached while the running pod lacks the NIC).
		`ClusterNetwork/corp\s+Auto\s+no\s+web-cn-corp-kumpx7\s+-\s+AwaitingRestart\s+no\s+default\s+-\s+prod-changes-at-restart\n`,
		`ClusterNetwork/old \(removed\)\s+Auto\s+yes\s+web-cn-old-dqdpy6\s+10\.30\.0\.7\s+-\s+no\s+-\s+-\s+prod-changes-at-restart\n`,
		`held until the next restart \(hotplug not allowed\): ClusterNetwork/corp, ClusterNetwork/old\n`,
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("output lacks %s:\n%s", row, out)
		}
	}
}

func TestEvaluateYAMLCarriesProvenance(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", append(layeredArgs, "-o", "yaml")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ev dryrunv1.Evaluation
	if err := yaml.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatal(err)
	}
	res := ev.Status
	want := []dryrunv1.Provenance{
		{Allocation: "default", Skip: "tenant-shared-network", Hotplug: "prod-changes-at-restart"},
		{Allocation: "default", Hotplug: "prod-changes-at-restart"},
		{Hotplug: "prod-changes-at-restart"},
	}
	if len(res.Interfaces) != len(want) {
		t.Fatalf("%d interfaces, want %d:\n%s", len(res.Interfaces), len(want), out)
	}
	for i, w := range want {
		if got := res.Interfaces[i].Decision.Provenance; got != w {
			t.Errorf("interface %d provenance = %+v, want %+v", i, got, w)
		}
	}
	if tr := res.Interfaces[0].Decision.Trace; tr.Input == nil || tr.Input.Interface.IPAddressName != "mine" {
		t.Errorf("trace.input = %+v, want the input the policies saw", tr.Input)
	}
}

// The input a policy sees, in -o yaml, carries the network's type and the interface's MAC
// (status.networks[].macAddress of the VM file): a VLAN ClusterNetwork as SDN documents it
// (type, vlan, parentNodeNetworkInterfaces) is read without complaint.
func TestEvaluateShowsTheNetworkTypeAndTheMACInTheInput(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "evaluate", "-f", "testdata/vlan/vm.yaml", "-O", "testdata/vlan/world.yaml", "--assume-ready", "-o", "yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var ev dryrunv1.Evaluation
	if err := yaml.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Status.Interfaces) != 1 {
		t.Fatalf("%d interfaces, want 1:\n%s", len(ev.Status.Interfaces), out)
	}
	in := ev.Status.Interfaces[0].Decision.Trace.Input
	if in == nil || in.Network.Type != "VLAN" || in.Interface.MACAddress != "02:5e:4c:00:00:01" {
		t.Errorf("trace.input = %+v, want network.type VLAN and interface.macAddress 02:5e:4c:00:00:01", in)
	}
}

func TestEvaluateNamesTheFileOfAProblem(t *testing.T) {
	code, _, errOut := run(t, "ipamctl", "evaluate", "-f", "testdata/vm.yaml", "-p", "testdata/broken.yaml")
	if code != 1 || !strings.Contains(errOut, "testdata/broken.yaml: spec.skipRules[0].expression: Invalid value") ||
		!strings.Contains(errOut, "undeclared reference to 'ipAdress'") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and the policy file with the field path", code, errOut)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad-vm.yaml")
	if err := os.WriteFile(bad, []byte("kind: VirtualMachine\napiVersion: virtualization.deckhouse.io/v1alpha2\nmetadata: {name: x}\nspec: {networks: [{type: Bogus}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(t, "ipamctl", "evaluate", "-f", bad)
	if code != 1 || !strings.Contains(errOut, bad+`: spec.networks[0].type: Unsupported value: "Bogus"`) {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestEvaluateReportsTheVMsAndThePoliciesProblemsTogether(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad-vm.yaml")
	if err := os.WriteFile(bad, []byte("kind: VirtualMachine\napiVersion: virtualization.deckhouse.io/v1alpha2\nmetadata: {name: Web_1}\nspec: {networks: [{type: Bogus}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := run(t, "ipamctl", "evaluate", "-f", bad, "-p", "testdata/broken.yaml", "-O", "testdata/world.yaml")
	for _, want := range []string{
		bad + `: metadata.name: Invalid value: "Web_1"`,
		bad + `: spec.networks[0].type: Unsupported value: "Bogus"`,
		"testdata/broken.yaml: spec.skipRules[0].expression: Invalid value",
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q", code, errOut, want)
		}
	}
}

func TestAFileOfTheWrongKindGetsTheRightFlagHinted(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-f", "testdata/static-not-allowed.yaml"},
			"testdata/static-not-allowed.yaml: -f takes VirtualMachines, not ClusterIPAMPolicy; pass policies with -p/--policy"},
		{[]string{"-f", "testdata/world.yaml"}, "-f takes VirtualMachines, not ClusterNetwork, IPAddress; pass other objects with -O/--objects"},
		{[]string{"-f", "testdata/vm.yaml", "-O", "testdata/broken.yaml"},
			"testdata/broken.yaml: -O takes objects to lay over the cluster's state, not ClusterIPAMPolicy; pass policies with -p/--policy"},
		{[]string{"-f", "testdata/vm.yaml", "-p", "testdata/vm.yaml"},
			"-p takes ClusterIPAMPolicies, not VirtualMachine; pass the VirtualMachine to evaluate with -f/--filename"},
	}
	for _, tc := range cases {
		code, _, errOut := run(t, "ipamctl", append([]string{"evaluate"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("evaluate %v: exit %d, stderr %q; want 1 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestUsageErrorsExitWith2(t *testing.T) {
	for _, args := range [][]string{{"evaluate"}, {"evaluate", "-f", "testdata/vm.yaml", "-o", "wide"}, {"lint"}, {"evaluate", "--nope"}} {
		if code, _, errOut := run(t, "ipamctl", args...); code != 2 || !strings.Contains(errOut, "Run 'ipamctl --help' for usage.") {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a usage hint", args, code, errOut)
		}
	}
}

func TestAsKubectlPluginItCallsItselfKubectlIpam(t *testing.T) {
	code, out, _ := run(t, "kubectl-ipam", "--help")
	if code != 0 || !strings.Contains(out, "kubectl ipam [command]") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestLint(t *testing.T) {
	code, out, _ := run(t, "ipamctl", "lint", "../../../policies/default.yaml", "../../../samples/policies", "testdata/static-not-allowed.yaml")
	if code != 0 || strings.Count(out, ": ok\n") != 5 {
		t.Errorf("lint of good policies: exit %d\n%s", code, out)
	}
	code, out, errOut := run(t, "ipamctl", "lint", "testdata/static-not-allowed.yaml", "testdata/broken.yaml")
	if code != 1 || !strings.Contains(out, "testdata/broken.yaml: spec.skipRules[0].expression: Invalid value: \"ipAdress.exists\"") ||
		!strings.Contains(errOut, "1 of 2 policies have errors") {
		t.Errorf("lint of a broken policy: exit %d\n%s%s", code, out, errOut)
	}
}

// A schema error kube-openapi names only in its text (a format's range) is reported at its
// field: `priority: 3000000000` was "Invalid value: \"\": … in spec.priority" at no field, and
// `priority: 10.5` added it beside the type error (issue #15, tester atk18).
func TestLintNamesTheFieldOfAFormatError(t *testing.T) {
	dir := t.TempDir()
	for value, want := range map[string]string{
		"3000000000": "big.yaml: spec.priority: Invalid value: Checked value must be of type integer with format int32\n",
		"10.5":       "big.yaml: spec.priority: Invalid value: \"float64\": spec.priority in body must be of type int32: \"float64\"\n",
	} {
		f := filepath.Join(dir, "big.yaml")
		body := "apiVersion: ipam.virtualization.deckhouse.io/v1alpha1\nkind: ClusterIPAMPolicy\nmetadata: {name: big}\nspec: {priority: " + value + "}\n"
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, _ := run(t, "ipamctl", "lint", f)
		if code != 1 || strings.TrimPrefix(out, dir+"/") != want {
			t.Errorf("priority %s: exit %d, output %q, want 1 and %q", value, code, out, want)
		}
	}
}

// evaluate names the field of a VM manifest it cannot use: a NIC field the platform's CRD does
// not have (a misspelled `IPAddressName` was dropped and the interface decided Auto) and a
// creation time that is no time (reported at no field) (issue #15, tester atk18).
func TestEvaluateNamesTheFieldOfABadVM(t *testing.T) {
	dir := t.TempDir()
	for meta, want := range map[string]string{
		"":                               "spec.networks[1].IPAddressName: Invalid value: unknown field",
		", creationTimestamp: yesterday": `metadata.creationTimestamp: Invalid value: "yesterday": must be a time in RFC 3339 form`,
	} {
		f := filepath.Join(dir, "vm.yaml")
		body := "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachine\nmetadata: {name: web, namespace: demo" + meta +
			"}\nspec:\n  networks:\n  - {type: Main}\n  - {type: ClusterNetwork, name: corp, IPAddressName: web-ip}\n"
		if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := run(t, "ipamctl", "evaluate", "-f", f)
		if code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("metadata %q: exit %d, output %s%s, want an error containing %q", meta, code, out, errOut, want)
		}
	}
}

// Offline, a field written in another case than its schema's is refused wherever the schema
// knows the field, also where the trimmed schemas keep unknown fields: a VM's `Networks:` was
// dropped and the VM decided with no interface, a ClusterNetwork's `IPAM:` made it poolless
// (issue #15, a new user's try). A policy file names its kind for lint as for evaluate and
// test; a suite is one document without repeated keys, and its policy files hold a policy.
func TestFrontEndsRefuseWhatTheClusterWouldNotTake(t *testing.T) {
	dir := t.TempDir()
	write := fileWriter(t, dir)
	vm := write("vm.yaml", "apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachine\nmetadata: {name: web, namespace: demo}\n"+
		"spec:\n  Networks:\n  - {type: Main}\n  - {type: ClusterNetwork, name: corp}\n")
	world := write("world.yaml", "apiVersion: network.deckhouse.io/v1alpha1\nkind: ClusterNetwork\nmetadata: {name: corp}\nspec: {IPAM: {}}\n")
	_, _, errOut := run(t, "ipamctl", "evaluate", "-f", vm, "-O", world)
	for _, want := range []string{`spec.Networks: Invalid value: unknown field (the field is "networks")`,
		`spec.IPAM: Invalid value: unknown field (the field is "ipam")`} {
		if !strings.Contains(errOut, want) {
			t.Errorf("evaluate: %s\nwant %q", errOut, want)
		}
	}
	kindless := write("kindless.yaml", "metadata: {name: x}\nspec: {priority: 3}\n")
	if code, out, _ := run(t, "ipamctl", "lint", kindless); code != 1 || !strings.Contains(out, "apiVersion and kind are required") {
		t.Errorf("lint of a policy without kind: exit %d: %s", code, out)
	}
	write("empty.yaml", "# nothing\n")
	suite := "apiVersion: cli.ipam.virtualization.deckhouse.io/v1alpha1\nkind: PolicyTest\npolicies: [%s]\ncases:\n- name: c\n  expect: {%s}\n"
	for _, tc := range []struct{ name, body, want string }{
		{"an empty policy file", fmt.Sprintf(suite, "empty.yaml", "noPolicyMatched: true"), "no ClusterIPAMPolicy in the file"},
		{"a policy file without kind", fmt.Sprintf(suite, "kindless.yaml", "noPolicyMatched: true"), "kind: Required value"},
		{"a repeated key", fmt.Sprintf(suite, "empty.yaml", "skip: false, skip: true"), `key "skip" already set in map`},
		{"two documents", fmt.Sprintf(suite, "empty.yaml", "skip: true") + "---\n" + fmt.Sprintf(suite, "empty.yaml", "skip: true"),
			"2 documents, want one suite per file"},
	} {
		code, out, _ := run(t, "ipamctl", "test", write("suite.yaml", tc.body))
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant 1 and %q", tc.name, code, out, tc.want)
		}
	}
}

var summary = regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed\n\z`)

func TestTestRunsTheShippedSuites(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "test", "../../../samples/cases")
	m := summary.FindStringSubmatch(out)
	if code != 0 || m == nil || m[1] == "0" || m[2] != "0" {
		t.Errorf("exit %d, output:\n%s%s\nwant every case to pass and the summary last", code, out, errOut)
	}
}

func TestTestShowsAWrongExpectationReadably(t *testing.T) {
	code, out, _ := run(t, "ipamctl", "test", "testdata/wrong-expectation.yaml")
	want := `FAIL testdata/wrong-expectation.yaml (2 cases)
  FAIL a static address is accepted (wrong on purpose)
      skip: got "true", want "false"
      reason: got "StaticNotAllowed", want ""
1 passed, 1 failed
`
	if code != 1 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant 1 and:\n%s", code, out, want)
	}
}

func TestTestNamesTheFileAndCaseOfAMisspelledExpectation(t *testing.T) {
	code, out, _ := run(t, "ipamctl", "test", "testdata/typo-expectation.yaml")
	want := `ERROR testdata/typo-expectation.yaml: cases[1] "the rule that refuses it": unknown field "expect.rulee"
0 passed, 0 failed
`
	if code != 1 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant 1 and:\n%s", code, out, want)
	}
}

// ipamctl test reads a suite's policies as lint, evaluate and the dry-run API do, and its
// inputs case-sensitively with null removing what the defaults set. Before, a policy's
// `Match:` (which the cluster drops, so that the policy decides for every VM) was applied as
// `match:` and the suite passed; a key given twice passed lint with the last one winning; and
// `ipAddressName: null` in a case left the defaults' value (issue #15, tester atk18).
func TestTestReadsFilesAsTheOtherFrontEnds(t *testing.T) {
	dir := t.TempDir()
	write := fileWriter(t, dir)
	const head = "apiVersion: ipam.virtualization.deckhouse.io/v1alpha1\nkind: ClusterIPAMPolicy\nmetadata: {name: p}\nspec:\n  priority: 5\n"
	suite := func(input string) string {
		return write("suite.yaml", `apiVersion: cli.ipam.virtualization.deckhouse.io/v1alpha1
kind: PolicyTest
policies: [policy.yaml]
defaults:
  network: {exists: true, ready: true, ipamEnabled: true}
  vm: {labels: {team: a}}
  interface: {type: ClusterNetwork, name: corp, ipAddressName: web}
cases:
- name: c
  input: `+input+`
  expect: {allocation: None, policy: p}
`)
	}
	for _, tc := range []struct{ name, policy, input, want string }{
		{"a field in another case", head + "  Match: {vmSelector: {matchLabels: {team: a}}}\n  allocation: {expression: \"'None'\"}\n", "{}",
			"document 0: spec.Match: Invalid value: unknown field"},
		{"a key given twice", head + "  allocation: {expression: \"'None'\"}\n  allocation: {expression: \"'Auto'\"}\n", "{}",
			`key "allocation" already set in map`},
		{"an input field in another case", head + "  allocation: {expression: \"'None'\"}\n", "{VM: {Labels: {team: b}}}",
			`input: unknown field "VM"`},
	} {
		write("policy.yaml", tc.policy)
		code, out, _ := run(t, "ipamctl", "test", suite(tc.input))
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, output:\n%s\nwant 1 and %q", tc.name, code, out, tc.want)
		}
		if tc.input != "{}" {
			continue
		}
		if code, out, errOut := run(t, "ipamctl", "lint", filepath.Join(dir, "policy.yaml")); code == 0 {
			t.Errorf("%s: lint passed: %s%s", tc.name, out, errOut)
		}
	}
	write("policy.yaml", head+"  allocation: {expression: \"has(interface.ipAddressName) ? 'Auto' : 'None'\"}\n")
	if code, out, _ := run(t, "ipamctl", "test", suite("{interface: {ipAddressName: null}}")); code != 0 {
		t.Errorf("ipAddressName: null: exit %d, output:\n%s\nwant the defaults' value removed", code, out)
	}
}

// apiServer is a fake API server serving the dry-run API in namespace: it checks the
// kubeconfig's token and the path, records the body and answers with answer.
func apiServer(t *testing.T, namespace string, code int, answer any) (*httptest.Server, *[]byte) {
	t.Helper()
	var got []byte
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/apis/dryrun.ipam.virtualization.deckhouse.io/v1alpha1/namespaces/"+namespace+"/evaluations" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"})
			return
		}
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

// kubeconfig writes a kubeconfig for an API server at apiServer with a token and namespace.
func kubeconfig(t *testing.T, apiServer string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	data := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + apiServer + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: s3cret}}]
contexts: [{name: ctx, context: {cluster: c, user: u, namespace: team}}]
current-context: ctx
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDryRunCreatesAnEvaluationWithTheKubeconfig(t *testing.T) {
	answer := &dryrunv1.Evaluation{TypeMeta: metav1.TypeMeta{APIVersion: dryrunv1.SchemeGroupVersion.String(), Kind: dryrunv1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team"},
		Status: dryrunv1.EvaluationStatus{VM: dryrunv1.VMSummary{Namespace: "team", Name: "web", Exists: true},
			Policies: dryrunv1.PolicySummary{Source: dryrunv1.PoliciesInstalled, Order: []string{"default"}}}}
	srv, sent := apiServer(t, "team", http.StatusCreated, answer)
	vm := filepath.Join(t.TempDir(), "vm.yaml")
	if err := os.WriteFile(vm, []byte("apiVersion: virtualization.deckhouse.io/v1alpha2\nkind: VirtualMachine\nmetadata: {name: web}\nspec: {networks: [{type: Network, name: lan}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "ipamctl", "dry-run", "-f", vm, "--kubeconfig", kubeconfig(t, srv.URL), "-o", "yaml")
	if code != 0 || !strings.Contains(out, "kind: Evaluation") || !strings.Contains(out, "exists: true") {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	var ev dryrunv1.Evaluation
	if err := json.Unmarshal(*sent, &ev); err != nil || ev.Kind != dryrunv1.Kind || ev.Spec.VM == nil ||
		!strings.Contains(string(ev.Spec.VM.Raw), `"name":"web"`) {
		t.Errorf("sent %s: want an Evaluation with the VM in spec.vm", *sent)
	}
	code, out, _ = run(t, "ipamctl", "dry-run", "-f", vm, "--kubeconfig", kubeconfig(t, srv.URL))
	if code != 0 || !strings.Contains(out, "VirtualMachine team/web (exists); policies (installed): default") ||
		!strings.Contains(out, "Once the virtualization controller applies the record:\n  networks-spec at the next start: no additional interface\n") {
		t.Errorf("exit %d, table (an empty answer reads no additional interface):\n%s", code, out)
	}
}

func TestDryRunShowsAnInvalidAnswerAgainstTheFiles(t *testing.T) {
	st := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: 422,
		Reason: metav1.StatusReasonInvalid, Message: "invalid", Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
			{Field: "spec.policies[0].spec.skipRules[0].expression", Message: "Invalid value: undeclared reference to 'ipAdress'"}}}}
	srv, _ := apiServer(t, "demo", http.StatusUnprocessableEntity, st)
	code, _, errOut := run(t, "ipamctl", "dry-run", "-f", "testdata/vm.yaml", "-p", "testdata/broken.yaml",
		"--kubeconfig", kubeconfig(t, srv.URL))
	if code != 1 || !strings.Contains(errOut, "testdata/broken.yaml: spec.skipRules[0].expression: Invalid value: undeclared reference") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestDryRunHintsAtTheAPIServiceWhenTheGroupIsNotServed: a cluster without vmipam's
// APIService answers 404 for the path; the message says what to check.
func TestDryRunHintsAtTheAPIServiceWhenTheGroupIsNotServed(t *testing.T) {
	srv, _ := apiServer(t, "elsewhere", http.StatusCreated, nil)
	code, _, errOut := run(t, "ipamctl", "dry-run", "-f", "testdata/vm.yaml", "--kubeconfig", kubeconfig(t, srv.URL))
	if code != 1 || !strings.Contains(errOut, "APIService") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}

// TestLintFailsOnNothingToLint: an empty file must not pass an admin's CI by accident.
func TestLintFailsOnNothingToLint(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "ipamctl", "lint", empty)
	if code == 0 || !strings.Contains(out+errOut, "no policy documents found") {
		t.Errorf("exit %d, output %q %q", code, out, errOut)
	}
}

// TestTestReportsASuiteWithAMistypedKind: a directory scan must not skip a suite whose kind
// is mistyped — the admin's CI would pass without running it — while other YAML files
// (policies beside the suites) are still left alone.
func TestTestReportsASuiteWithAMistypedKind(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "test", "testdata/kind-typo")
	if code != 1 || !strings.Contains(out, "testdata/kind-typo/suite.yaml") || !strings.Contains(out, `kind "PolicyTests"`) ||
		strings.Contains(out, "policy.yaml") {
		t.Errorf("exit %d, output:\n%s%s\nwant 1 and an error for suite.yaml naming kind \"PolicyTests\", nothing about policy.yaml", code, out, errOut)
	}
}

func TestLintWarnsWithoutFailing(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "lint", "../../../samples/cases/layering/")
	if code != 0 {
		t.Fatalf("exit %d, want 0 (warnings do not fail lint): %s\n%s", code, errOut, out)
	}
	for _, want := range []string{
		`layering/policies.yaml#5: spec.skipRules[0].expression: warning: indexes a map without testing for the key`,
		`layering/legacy-full-copy.yaml: spec.skipRules[3].name: warning: rule "static-missing" of this policy (priority 100) replaces rule "static-missing" of policy builtin:default (priority 1000) wherever both match`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A caller who may not list the installed policies gets an answer without their order and a
// warning saying so: the warning prints as kubectl prints one ("Warning: …" on stderr, not a
// klog line), and the table says the order was omitted and why, not that there is none.
func TestDryRunPrintsWarningsAndAnOmittedOrderAsKubectlWould(t *testing.T) {
	answer := &dryrunv1.Evaluation{TypeMeta: metav1.TypeMeta{APIVersion: dryrunv1.SchemeGroupVersion.String(), Kind: dryrunv1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team"},
		Status: dryrunv1.EvaluationStatus{VM: dryrunv1.VMSummary{Namespace: "team", Name: "web", Exists: true},
			Policies: dryrunv1.PolicySummary{Source: dryrunv1.PoliciesInstalled}, Omitted: []string{dryrunv1.OmittedPolicyDetails}}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Warning", `299 - "`+dryrunv1.OmittedPolicyDetails+`"`)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(srv.Close)
	code, out, errOut := run(t, "ipamctl", "dry-run", "-f", "testdata/vm.yaml", "--kubeconfig", kubeconfig(t, srv.URL))
	if code != 0 || errOut != "Warning: "+dryrunv1.OmittedPolicyDetails+"\n" {
		t.Errorf("exit %d, stderr %q, want the warning as kubectl prints it", code, errOut)
	}
	if !strings.Contains(out, "policies (installed): order omitted (requires list clusteripampolicies), then the built-in default") {
		t.Errorf("table:\n%s\nwant the order said to be omitted, and why", out)
	}
}
