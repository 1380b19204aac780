package cli

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/plan"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// What the VM would look like once the record is applied shows the controller's text; the dry
// run's own notice that it does not retry interfaces its VM budget left undecided is printed
// apart, once. Before, the status block held the dry run's notice, which the controller never
// writes.
func TestTheDryRunsBudgetNoticeIsPrintedApartFromTheStatus(t *testing.T) {
	undecided := dryrunv1.InterfaceResult{Type: "ClusterNetwork", Name: "corp", Decision: dryrunv1.Decision{
		Reason: string(evaluator.ReasonPolicyError), Message: "operation interrupted: budget spent; " + plan.DryRunBudgetNotice}}
	r := &dryrunv1.EvaluationStatus{Interfaces: []dryrunv1.InterfaceResult{undecided, undecided},
		Applied: dryrunv1.AppliedVM{Conditions: []metav1.Condition{{Type: "NetworkReady", Status: "False",
			Reason: "NetworkNotReady", Message: "ClusterNetwork/corp: PolicyError: retried with backoff"}}}}
	var out bytes.Buffer
	printTable(&out, r)
	note, status, _ := strings.Cut(out.String(), "Once the virtualization controller applies the record:")
	if strings.Count(note, "Note: 2 interface(s) not evaluated") != 1 || !strings.Contains(note, "the dry run does not retry") {
		t.Errorf("before the status:\n%s\nwant one note that the dry run does not retry 2 interfaces", note)
	}
	if strings.Contains(status, "dry run") {
		t.Errorf("status block:\n%s\nwant the controller's text only", status)
	}
}

// The table shows names from the VM and the policies (an interface name, an ipAddressName, a
// rule name) as the controller's condition does, quoted when not plain: a line break, a tab, a
// terminal escape or a bidi override in one cannot break or disguise the table. Before, the
// names were printed raw (atk15b finding 2, "the evaluate table prints raw names too").
func TestTheTableQuotesNamesThatAreNotPlain(t *testing.T) {
	forged := "corp\nClusterNetwork/db\tAuto\x1b[2J\u202e"
	it := dryrunv1.InterfaceResult{Type: "ClusterNetwork", Name: forged, IPAddressName: "ip\nforged",
		Decision: dryrunv1.Decision{Provenance: dryrunv1.Provenance{Skip: "p"}, Rule: "rule\u202e"}}
	r := &dryrunv1.EvaluationStatus{Interfaces: []dryrunv1.InterfaceResult{it}}
	r.Applied.Networks = append(r.Applied.Networks, vmv1.NetworksStatus{Type: "ClusterNetwork", Name: forged, IPAddress: "10.0.0.1"})
	r.Applied.HeldUntilRestart = []string{consumer.Label("ClusterNetwork", forged)}
	var out bytes.Buffer
	printTable(&out, r)
	text := out.String()
	if strings.ContainsAny(text, "\t\x1b\u202e") {
		t.Errorf("table holds a tab, an escape or a bidi override:\n%q", text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "ClusterNetwork/db") || strings.HasPrefix(line, "forged") {
			t.Errorf("a name broke the table's line:\n%s", text)
		}
	}
	for _, want := range []string{`ClusterNetwork/"corp\nClusterNetwork/db\tAuto\x1b[2J\u202e"`, `"ip\nforged"`, `p/"rule\u202e"`} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %s:\n%s", want, text)
		}
	}
}

// The table notes what the policies that decide nothing found (issue #29): each error passed
// over under failurePolicy Ignore or of an Audit policy, naming the policy, its field and the
// error, and each Audit record that would decide otherwise. Before, they were in the JSON
// trace only.
func TestTheTableNotesErrorsPassedOverAndDifferingAuditRecords(t *testing.T) {
	it := dryrunv1.InterfaceResult{Type: "ClusterNetwork", Name: "corp", Decision: dryrunv1.Decision{
		Allocation: "Auto", Trace: dryrunv1.Trace{
			Failures: []dryrunv1.PolicyFailure{{Policy: "team-labels", Mode: v1alpha1.PolicyModeEnforce,
				FailurePolicy: v1alpha1.FailurePolicyIgnore, Field: "spec.hotplug.expression", Error: "no such key: team"}},
			Audit: []dryrunv1.AuditRecord{{Policy: "l2-trial", Allocation: "None", Differs: true},
				{Policy: "same", Allocation: "Auto"}}}}}
	var out bytes.Buffer
	printTable(&out, &dryrunv1.EvaluationStatus{Interfaces: []dryrunv1.InterfaceResult{it}})
	for _, want := range []string{
		"ClusterNetwork/corp: policy team-labels (failurePolicy Ignore: passed over) failed at spec.hotplug.expression: no such key: team",
		"ClusterNetwork/corp: Audit policy l2-trial would decide otherwise (not applied)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "policy same would") {
		t.Errorf("table notes an Audit record that decides alike:\n%s", out.String())
	}
}
