package cli

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	vmctrl "github.com/vmipam/vmipam/controller/vm"
	"github.com/vmipam/vmipam/evaluator"
)

// "Status (would be written)" shows the controller's text; the dry run's own notice that it
// does not retry interfaces its VM budget left undecided is printed apart, once. Before,
// the status block held the dry run's notice, which the controller never writes.
func TestTheDryRunsBudgetNoticeIsPrintedApartFromTheStatus(t *testing.T) {
	undecided := vmctrl.InterfaceResult{Type: "ClusterNetwork", Name: "corp", Decision: evaluator.Decision{
		Reason: evaluator.ReasonPolicyError, Message: "operation interrupted: budget spent; " + vmctrl.DryRunBudgetNotice}}
	r := &dryrunv1.EvaluationStatus{Interfaces: []vmctrl.InterfaceResult{undecided, undecided},
		VMStatus: dryrunv1.VMStatus{Changed: true, Conditions: []metav1.Condition{{Type: "NetworkReady", Status: "False",
			Reason: "NetworkNotReady", Message: "ClusterNetwork/corp: PolicyError: retried with backoff"}}}}
	var out bytes.Buffer
	printTable(&out, r)
	note, status, _ := strings.Cut(out.String(), "Status (would be written):")
	if strings.Count(note, "Note: 2 interface(s) not evaluated") != 1 || !strings.Contains(note, "the dry run does not retry") {
		t.Errorf("before the status:\n%s\nwant one note that the dry run does not retry 2 interfaces", note)
	}
	if strings.Contains(status, "dry run") {
		t.Errorf("status block:\n%s\nwant the controller's text only", status)
	}
}
