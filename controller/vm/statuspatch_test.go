package vm

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

func statusWith(nets []vmv1.NetworksStatus, conds ...metav1.Condition) *vmv1.VirtualMachineStatus {
	return &vmv1.VirtualMachineStatus{Phase: vmv1.PhaseRunning, Networks: nets, Conditions: conds}
}

func cond(t, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: reason}
}

func TestStatusJSONPatchTouchesOnlyOurEntries(t *testing.T) {
	main := vmv1.NetworksStatus{Type: vmv1.NetworkTypeMain, MACAddress: "02:00:00:00:00:01"}
	corp := vmv1.NetworksStatus{Type: vmv1.NetworkTypeClusterNetwork, Name: "corp", MACAddress: "02:00:00:00:00:02"}
	observed := statusWith([]vmv1.NetworksStatus{main, corp}, cond("Running", "Up"), cond(ConditionNetworkReady, "Old"),
		metav1.Condition{Type: ConditionAwaitingRestart, Status: metav1.ConditionTrue, Reason: ReasonChangesPendingRestart})
	withAddress := corp
	withAddress.IPAddress = "10.0.0.5"
	desired := statusWith([]vmv1.NetworksStatus{main, withAddress}, cond("Running", "Up"), cond(ConditionNetworkReady, "New"))

	ops, ok := statusJSONPatch(observed, desired)
	if !ok {
		t.Fatal("no JSON patch for a change inside existing entries")
	}
	got, _ := json.Marshal(ops)
	want := `[{"op":"test","path":"/status/networks/1/type","value":"ClusterNetwork"},` +
		`{"op":"test","path":"/status/networks/1/name","value":"corp"},` +
		`{"op":"add","path":"/status/networks/1/ipAddress","value":"10.0.0.5"},` +
		`{"op":"test","path":"/status/conditions/1/type","value":"NetworkReady"},` +
		`{"op":"replace","path":"/status/conditions/1","value":{"type":"NetworkReady","status":"True","lastTransitionTime":null,"reason":"New","message":"New"}},` +
		`{"op":"test","path":"/status/conditions/2/type","value":"AwaitingRestartToApplyConfiguration"},` +
		`{"op":"test","path":"/status/conditions/2/reason","value":"ChangesPendingRestart"},` +
		`{"op":"remove","path":"/status/conditions/2","value":null}]`
	if string(got) != want {
		t.Errorf("patch\n got %s\nwant %s", got, want)
	}
}

func TestStatusJSONPatchRemovesAnAddressWithItsTest(t *testing.T) {
	had := vmv1.NetworksStatus{Type: vmv1.NetworkTypeNetwork, Name: "n", IPAddress: "10.0.0.5"}
	ops, ok := statusJSONPatch(statusWith([]vmv1.NetworksStatus{had}), statusWith([]vmv1.NetworksStatus{{Type: had.Type, Name: "n"}}))
	if !ok || len(ops) != 3 || ops[2].Op != "remove" || ops[2].Path != "/status/networks/0/ipAddress" {
		t.Errorf("ops %+v, ok %v: want type and name tested, then ipAddress removed", ops, ok)
	}
}

// A list to build or reshape, or a condition to add, is the lock's: no JSON patch.
func TestStatusJSONPatchFallsBackWhenAListChangesShape(t *testing.T) {
	a := vmv1.NetworksStatus{Type: vmv1.NetworkTypeNetwork, Name: "a"}
	b := vmv1.NetworksStatus{Type: vmv1.NetworkTypeNetwork, Name: "b"}
	ready := cond(ConditionNetworkReady, "NetworkReady")
	for name, c := range map[string]struct{ observed, desired *vmv1.VirtualMachineStatus }{
		"first write":         {statusWith(nil), statusWith([]vmv1.NetworksStatus{a}, ready)},
		"entry added":         {statusWith([]vmv1.NetworksStatus{a}, ready), statusWith([]vmv1.NetworksStatus{a, b}, ready)},
		"entries reordered":   {statusWith([]vmv1.NetworksStatus{a, b}, ready), statusWith([]vmv1.NetworksStatus{b, a}, ready)},
		"condition appended":  {statusWith([]vmv1.NetworksStatus{a}, cond("Running", "Up")), statusWith([]vmv1.NetworksStatus{a}, cond("Running", "Up"), ready)},
		"entry without name":  {statusWith([]vmv1.NetworksStatus{{Type: vmv1.NetworkTypeMain}}, ready), statusWith([]vmv1.NetworksStatus{{Type: vmv1.NetworkTypeMain, IPAddress: "10.0.0.1"}}, ready)},
		"another field moved": {statusWith([]vmv1.NetworksStatus{a}, ready), statusWith([]vmv1.NetworksStatus{{Type: a.Type, Name: "a", MACAddress: "x"}}, ready)},
	} {
		if ops, ok := statusJSONPatch(c.observed, c.desired); ok {
			t.Errorf("%s: got JSON patch %+v, want the locked fallback", name, ops)
		}
	}
}
