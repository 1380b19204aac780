package dryrun_test

import (
	"context"
	"errors"
	corev1 "k8s.io/api/core/v1"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func evaluate(t *testing.T, e *dryrun.Engine, base client.Reader, installed *evaluator.Set, body string) *dryrunv1.EvaluationStatus {
	t.Helper()
	res, err := e.Evaluate(context.Background(), base, installed, decode(t, e, body))
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return res
}

func TestANewVMGetsItsAutoIPAddressPlanned(t *testing.T) {
	e := newEngine(t)
	res := evaluate(t, e, nil, nil, vmOnCorp+"objects: ["+corp+"]")
	it := res.Interfaces[0]
	if it.Decision.Allocation != string(evaluator.AllocationAuto) || it.Reason != string(evaluator.ReasonIPAddressPending) ||
		it.Decision.Policy != "default" || it.Decision.Rule != "auto-pending" {
		t.Errorf("interface = %+v, want Auto pending, decided by the installed default", it)
	}
	if len(res.Actions.CreateIPAddresses) != 1 || res.Actions.CreateIPAddresses[0].Name != it.IPAddressName ||
		string(res.Actions.CreateIPAddresses[0].OwnerReferences[0].UID) != res.VM.UID {
		t.Errorf("create = %+v, want the interface's Auto IPAddress owned by the VM", res.Actions.CreateIPAddresses)
	}
	if res.VM.Exists || res.VM.UID == "" || res.Policies.Source != dryrunv1.PoliciesShipped || !res.Actions.Deferred {
		t.Errorf("result %+v: want a new VM with a stand-in UID, the shipped policies, its record deferred until SDN answers", res.VM)
	}
	again := evaluate(t, e, nil, nil, vmOnCorp+"objects: ["+corp+"]")
	if again.VM.UID != res.VM.UID || again.Interfaces[0].IPAddressName != it.IPAddressName {
		t.Error("a second evaluation of the same input differs")
	}
}

func TestTheLiveVMIsMergedWithTheRequestOne(t *testing.T) {
	e := newEngine(t)
	live := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "uid-web",
		Labels: map[string]string{"team": "a"}},
		Spec: vmv1.VirtualMachineSpec{Networks: []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeMain}}},
		Status: vmv1.VirtualMachineStatus{Phase: vmv1.PhaseRunning, Networks: []vmv1.NetworksStatus{
			{Type: vmv1.NetworkTypeClusterNetwork, Name: "corp", MACAddress: "02:00:00:00:00:01"}}}}
	auto := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-cn-corp-x", UID: "uid-ip",
		Annotations: map[string]string{plan.AnnotationInterface: "ClusterNetwork/gone"}, // made by vmipam
		OwnerReferences: []metav1.OwnerReference{{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
			Name: "web", UID: "uid-web", Controller: ptr.To(true)}}},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: "gone"}}}
	// corp's Auto IPAddress is allocated already: a plan still waiting for SDN would delete nothing.
	current := auto.DeepCopy()
	current.Name, current.UID = naming.AutoIPAddress("web", "ClusterNetwork", "corp"), "uid-ip-corp"
	current.Annotations = map[string]string{plan.AnnotationInterface: "ClusterNetwork/corp"}
	current.Spec.NetworkRef.Name = "corp"
	current.Status = sdnv1.IPAddressStatus{Address: "10.0.0.5", Phase: sdnv1.IPAddressPhaseAllocated}
	base := fakeCluster(t, live, auto, current)
	res := evaluate(t, e, base, nil, vmOnCorp+"objects: ["+corp+"]")
	if !res.VM.Exists || res.VM.UID != "uid-web" {
		t.Errorf("VM = %+v, want the live one's UID", res.VM)
	}
	if len(res.Actions.DeleteIPAddresses) != 1 || res.Actions.DeleteIPAddresses[0] != "web-cn-corp-x" {
		t.Errorf("delete = %v, want the live VM's Auto IPAddress that no interface wants", res.Actions.DeleteIPAddresses)
	}
	if got := res.Applied.Networks[1].MACAddress; got != "02:00:00:00:00:01" {
		t.Errorf("status.networks[1].macAddress = %q, want the live one kept", got)
	}
}

func TestObjectsReplaceLiveOnes(t *testing.T) {
	e := newEngine(t)
	allocated := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "st"},
		Spec:   sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeStatic, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: "corp"}},
		Status: sdnv1.IPAddressStatus{Address: "10.0.0.5", Phase: sdnv1.IPAddressPhaseAllocated}}
	base := fakeCluster(t, allocated)
	body := `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: ClusterNetwork, name: corp, ipAddressName: st}]}}
objects: [` + corp + `]`
	if res := evaluate(t, e, base, nil, body); !res.Interfaces[0].Attached || res.Interfaces[0].Address != "10.0.0.5" {
		t.Fatalf("with the live IPAddress: %+v, want attached with its address", res.Interfaces[0])
	}
	pending := body[:len(body)-1] + `, {apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: st},
  spec: {type: Static, networkRef: {kind: ClusterNetwork, name: corp}}, status: {phase: Pending}}]`
	if res := evaluate(t, e, base, nil, pending); res.Interfaces[0].Reason != string(evaluator.ReasonIPAddressNotAllocated) {
		t.Errorf("with the overlaid Pending IPAddress: %+v, want IPAddressNotAllocated", res.Interfaces[0])
	}
}

func TestObjectsWithoutUIDsAreDistinctVMsAndOwners(t *testing.T) {
	e := newEngine(t)
	body := `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: ClusterNetwork, name: corp, ipAddressName: st}]}}
objects:
- ` + corp + `
- {apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: st}, spec: {type: Static, networkRef: {kind: ClusterNetwork, name: corp}},
   status: {phase: Allocated, address: 10.0.0.5}}
- {apiVersion: virtualization.deckhouse.io/v1alpha2, kind: VirtualMachine, metadata: {name: old}, spec: {networks: [{type: ClusterNetwork, name: corp, ipAddressName: st}]}}`
	res := evaluate(t, e, nil, nil, body)
	if it := res.Interfaces[0]; it.Reason != string(evaluator.ReasonIPAddressInUse) || !strings.Contains(it.Message, "in use by VM old") {
		t.Errorf("interface = %+v, want IPAddressInUse by the older VM old (not mistaken for the VM itself)", it)
	}
	autoName := naming.AutoIPAddress("web", "ClusterNetwork", "corp")
	owned := vmOnCorp + `objects:
- ` + corp + `
- {apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: ` + autoName + `,
   ownerReferences: [{apiVersion: virtualization.deckhouse.io/v1alpha2, kind: VirtualMachine, name: web, controller: true}]},
   spec: {type: Auto, networkRef: {kind: ClusterNetwork, name: corp}}, status: {phase: Allocated, address: 10.0.0.9}}`
	res = evaluate(t, e, nil, nil, owned)
	if it := res.Interfaces[0]; it.IPAddressName != autoName || !it.Attached || it.Address != "10.0.0.9" {
		t.Errorf("interface = %+v, want the Auto IPAddress owned by name to be the VM's", it)
	}
	if len(res.Actions.CreateIPAddresses)+len(res.Actions.DeleteIPAddresses) > 0 {
		t.Errorf("actions = %+v, want neither create nor delete", res.Actions)
	}
}

func TestCandidatePoliciesReplaceTheInstalledOnes(t *testing.T) {
	e := newEngine(t)
	hold := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "hold"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Priority: 1, Allocation: &v1alpha1.Expression{Expression: "'None'"},
		SkipRules: []v1alpha1.SkipRule{{Name: "all", Expression: "true", Reason: "Held", Message: "held"}}}}
	installed := installedSet(t, e, hold)
	body := vmOnCorp + "objects: [" + corp + "]\n"
	if res := evaluate(t, e, nil, installed, body); res.Interfaces[0].Decision.Policy != "hold" {
		t.Errorf("installed: decided by %q, want hold", res.Interfaces[0].Decision.Policy)
	}
	res := evaluate(t, e, nil, installed, body+"policies: []\n")
	if res.Interfaces[0].Decision.Policy != evaluator.BuiltinPolicy || res.Policies.Source != dryrunv1.PoliciesRequest {
		t.Errorf("policies []: decided by %q (%s), want the built-in default alone", res.Interfaces[0].Decision.Policy, res.Policies.Source)
	}
	broken := `policies: [{metadata: {name: broken}, spec: {allocation: {expression: "'Auto'"}, skipRules: [{name: a, reason: R, expression: "ipAdress.exists"}]}}]`
	_, err := e.Decode(context.Background(), []byte(body+broken), dryrun.DecodeOptions{})
	var inv *dryrun.InvalidError
	if !errors.As(err, &inv) || inv.Errs[0].Field != "policies[0].spec.skipRules[0].expression" {
		t.Errorf("Decode of a policy that does not compile: %v, want an *InvalidError at policies[0].spec.skipRules[0].expression", err)
	}
	req := decode(t, e, body)
	req.Policies = []v1alpha1.ClusterIPAMPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Allocation: &v1alpha1.Expression{Expression: "'Auto'"},
		SkipRules:  []v1alpha1.SkipRule{{Name: "a", Reason: "R", Expression: "ipAdress.exists"}}}}}
	_, err = e.Evaluate(context.Background(), nil, installed, req)
	if !errors.As(err, &inv) || inv.Errs[0].Field != "policies[0].spec.skipRules[0].expression" {
		t.Errorf("Evaluate of a built Request with a policy that does not compile: %v, want an *InvalidError at policies[0].spec.skipRules[0].expression", err)
	}
}

func installedSet(t *testing.T, e *dryrun.Engine, ps ...*v1alpha1.ClusterIPAMPolicy) *evaluator.Set {
	t.Helper()
	b, err := policies.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	builtin, errs := e.Compiler().Compile(b, b)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var compiled []*evaluator.Policy
	for _, p := range ps {
		c, errs := e.Compiler().Compile(p, p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		compiled = append(compiled, c)
	}
	return evaluator.NewSet(compiled, builtin)
}

func TestOnlyVMIPAMConditionsAreReported(t *testing.T) {
	e := newEngine(t)
	res := evaluate(t, e, nil, nil, `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: ClusterNetwork, name: corp}]},
  status: {conditions: [{type: Running, status: "True", reason: X, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}]}}`)
	if len(res.Applied.Conditions) != 1 || res.Applied.Conditions[0].Type != consumer.ConditionNetworkReady {
		t.Errorf("conditions = %+v, want NetworkReady only", res.Applied.Conditions)
	}
}

func TestAVMWhoseLastAdditionalNetworkWasRemovedIsAnswered(t *testing.T) {
	e := newEngine(t)
	auto := naming.AutoIPAddress("web", "ClusterNetwork", "corp")
	live := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "uid-web"},
		Spec: vmv1.VirtualMachineSpec{Networks: []vmv1.NetworksSpec{{Type: vmv1.NetworkTypeMain}, {Type: vmv1.NetworkTypeClusterNetwork, Name: "corp"}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "virt-launcher-web-1",
		Labels:      map[string]string{vmv1.LabelLauncherVMName: "web"},
		Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: `[{"type":"ClusterNetwork","name":"corp","ifName":"veth_x","ipAssignmentMode":"DHCP","ipAddressNames":["` + auto + `"]}]`}}}
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: auto, UID: "uid-auto",
		Annotations: map[string]string{plan.AnnotationInterface: "ClusterNetwork/corp"}, // made by vmipam
		OwnerReferences: []metav1.OwnerReference{{APIVersion: vmv1.GroupVersion.String(), Kind: "VirtualMachine",
			Name: "web", UID: "uid-web", Controller: ptr.To(true)}}},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: "ClusterNetwork", Name: "corp"}}}
	res := evaluate(t, e, fakeCluster(t, live, ip, pod), nil, `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: Main}]}}`)
	if len(res.Interfaces) != 1 || !res.Interfaces[0].Removed || res.Interfaces[0].Decision.Allocation != string(evaluator.AllocationAuto) {
		t.Errorf("interfaces = %+v, want the removed ClusterNetwork/corp with its applied Auto allocation", res.Interfaces)
	}
	if len(res.Actions.DeleteIPAddresses) != 1 || res.Actions.DeleteIPAddresses[0] != auto || !res.Actions.RecordChanged ||
		len(res.Applied.Running) != 0 {
		t.Errorf("actions = %+v, applied %+v: want the Auto IPAddress released and the record written, unplugging it", res.Actions, res.Applied)
	}
}

// OnDecided sees the evaluator's decision of every interface the spec names (the API server
// counts them in metrics), before the answer is converted to the API's types; a removed
// interface, asked only hotplug, is not counted.
func TestOnDecidedSeesTheEvaluatorsDecisions(t *testing.T) {
	e := newEngine(t)
	var decided []evaluator.Decision
	e.OnDecided = func(d evaluator.Decision) { decided = append(decided, d) }
	res := evaluate(t, e, nil, nil, vmOnCorp+"objects: ["+corp+"]")
	if len(decided) != 1 || string(decided[0].Allocation) != res.Interfaces[0].Decision.Allocation ||
		decided[0].Policy != res.Interfaces[0].Decision.Policy || decided[0].Trace.Input == nil {
		t.Errorf("decided %+v, want the one interface's decision as answered: %+v", decided, res.Interfaces)
	}
}

// A manifest decoded by the dry run (and ipamctl evaluate, which uses the engine) keeps
// kubectl's last-applied-configuration, but policies do not see it, as in the cluster, whose
// cache drops it: before, a policy reading it decided None offline and Pass in the cluster.
func TestPoliciesDoNotSeeLastAppliedConfigurationInTheDryRun(t *testing.T) {
	e := newEngine(t)
	reads := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "la"}, Spec: v1alpha1.ClusterIPAMPolicySpec{
		Priority: 1, Allocation: &v1alpha1.Expression{
			Expression: "'kubectl.kubernetes.io/last-applied-configuration' in vm.annotations ? 'None' : 'Pass'"}}}
	installed := installedSet(t, e, reads)
	body := `vm: {metadata: {name: web, namespace: demo, annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}'}},
  spec: {networks: [{type: Main}, {type: ClusterNetwork, name: corp}]}}
objects: [` + corp + "]\n"
	res := evaluate(t, e, nil, installed, body)
	if d := res.Interfaces[0].Decision; d.Policy == "la" {
		t.Errorf("decided by %q (%s), want la to see no last-applied-configuration and pass", d.Policy, d.Allocation)
	}
}
