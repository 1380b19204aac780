package evaluator_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/evaluator"
)

// inputYAML is goInput() as an admin would write it in a test case or dry-run request.
const inputYAML = `
vm:
  name: vm-a
  namespace: ns
  uid: uid-a
  phase: Running
  creationTimestamp: 2026-01-02T03:04:05Z
  labels: {app: web, tier: front}
  annotations: null
interface: {index: 1, id: 2, type: ClusterNetwork, name: corp}
network:
  exists: true
  ready: true
  ipamEnabled: true
  pool: {kind: ClusterIPAddressPool, name: corp-pool}
ipAddress:
  exists: true
  name: vm-a-clusternetwork-corp
  type: Auto
  networkRef: {kind: ClusterNetwork, name: corp}
  phase: Allocated
  address: 10.0.0.5
  allocated: true
  owner: {name: vm-a, uid: uid-a}
holders: {vms: [vm-b]}
namespaceObject: {name: ns, labels: {env: prod}}
change: {kind: Add, to: {allocation: Auto}, vmRunning: true}
`

const inputJSON = `{
  "vm": {"name": "vm-a", "namespace": "ns", "uid": "uid-a", "phase": "Running",
         "creationTimestamp": "2026-01-02T03:04:05Z", "labels": {"app": "web", "tier": "front"}},
  "interface": {"index": 1, "id": 2, "type": "ClusterNetwork", "name": "corp"},
  "network": {"exists": true, "ready": true, "ipamEnabled": true,
              "pool": {"kind": "ClusterIPAddressPool", "name": "corp-pool"}},
  "ipAddress": {"exists": true, "name": "vm-a-clusternetwork-corp", "type": "Auto",
                "networkRef": {"kind": "ClusterNetwork", "name": "corp"}, "phase": "Allocated",
                "address": "10.0.0.5", "allocated": true, "owner": {"name": "vm-a", "uid": "uid-a"}},
  "holders": {"vms": ["vm-b"], "holder": null},
  "namespaceObject": {"name": "ns", "labels": {"env": "prod"}},
  "change": {"kind": "Add", "to": {"allocation": "Auto"}, "vmRunning": true}
}`

func goInput() evaluator.Input {
	in := pooledAuto()
	in.VM.CreationTimestamp = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in.VM.Labels = map[string]string{"app": "web", "tier": "front"}
	in.Interface.ID = 2
	in.Holders.VMs = []string{"vm-b"}
	in.Namespace.Labels = map[string]string{"env": "prod"}
	in.Change = evaluator.Change{Kind: evaluator.ChangeAdd, To: evaluator.ChangeState{Allocation: "Auto"}, VMRunning: true}
	return in
}

// TestInputsFromJSONAndYAMLDecideAlike uses expressions that would break on float64 numbers
// (arithmetic on interface.index and id) or on null values.
func TestInputsFromJSONAndYAMLDecideAlike(t *testing.T) {
	set := setOf(t, newCompiler(t), newPolicy("p",
		variable("slot", "interface.index + interface.id"),
		matchCondition("int", "variables.slot * 2 == 6"),
		matchCondition("time", "vm.creationTimestamp == timestamp('2026-01-02T03:04:05Z')"),
		matchCondition("maps", "namespaceObject.labels['env'] == 'prod' && vm.annotations.size() == 0"),
		allocation("holders.vms == ['vm-b'] && holders.holder == '' ? 'Auto' : 'None'"),
		variable("labels", "vm.labels.map(k, k + '=' + vm.labels[k])"),
		skipRule("r", "change.kind == 'Add' && change.vmRunning && change.from.allocation == ''", "Added", "",
			"variables.labels.join(',') + ' slot ' + string(variables.slot)"),
	))
	want := decide(set, goInput())
	if want.Policy != "p" || want.Message != "app=web,tier=front slot 3" {
		t.Fatalf("Go input: decision = %+v, want p's skip with message %q", want, "app=web,tier=front slot 3")
	}
	var fromJSON, fromYAML evaluator.Input
	if err := json.Unmarshal([]byte(inputJSON), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(inputYAML), &fromYAML); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]evaluator.Input{"JSON": fromJSON, "YAML": fromYAML} {
		if got := decide(set, in); !reflect.DeepEqual(got, want) {
			t.Errorf("%s input: decision = %+v\nwant %+v", name, got, want)
		}
	}
}

func TestInputMapsIterateInKeyOrder(t *testing.T) {
	exprs := []string{
		"vm.labels.map(k, k) == ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']",
		"vm.labels.filter(k, vm.labels[k] > '2') == ['c', 'd', 'e', 'f', 'g', 'h']",
		"vm.labels.transformList(k, v, k + v) == ['a1', 'b2', 'c3', 'd4', 'e5', 'f6', 'g7', 'h8']",
		"vm.labels.all(k, v, v != '') && vm.labels.exists_one(k, k == 'h')",
		"vm.labels == {'h': '8', 'g': '7', 'f': '6', 'e': '5', 'd': '4', 'c': '3', 'b': '2', 'a': '1'}",
		"'a' in vm.labels && vm.labels[?'z'].orValue('none') == 'none' && dyn(vm.labels).size() == 8",
	}
	in := pooledAuto()
	in.VM.Labels = map[string]string{"h": "8", "g": "7", "f": "6", "e": "5", "d": "4", "c": "3", "b": "2", "a": "1"}
	c := newCompiler(t)
	for _, e := range exprs {
		t.Run(e, func(t *testing.T) {
			set := setOf(t, c, newPolicy("p", matchCondition("m", e)))
			for range 10 {
				if d := decide(set, in); d.Policy != "p" {
					t.Fatalf("decision = %+v, want the condition to hold", d)
				}
			}
		})
	}
}

// A policy can pair the interface's MAC with its address and tell VLAN networks from Access
// ones: interface.macAddress and network.type are inputs, "" when unknown, and held to their
// declared bounds (17 characters, a colon-notation MAC; 16) like every other field.
func TestNetworkTypeAndMACAreInputs(t *testing.T) {
	set := setOf(t, newCompiler(t), newPolicy("p",
		allocation("network.type == 'VLAN' && interface.macAddress.startsWith('02:') ? 'None' : 'Pass'")))
	in := pooledAuto()
	if d := decide(set, in); d.Allocation != evaluator.AllocationAuto {
		t.Errorf("without a type or MAC: allocation %q, want the default's Auto", d.Allocation)
	}
	in.Network.Type, in.Interface.MACAddress = "VLAN", "02:5e:4c:11:22:33"
	if d := decide(set, in); d.Allocation != evaluator.AllocationNone || d.Provenance.Allocation != "p" {
		t.Errorf("on a VLAN network with a MAC: allocation %q by %q, want None by p", d.Allocation, d.Provenance.Allocation)
	}
	for field, edit := range map[string]func(*evaluator.Input){
		"interface.macAddress: 18 characters": func(in *evaluator.Input) { in.Interface.MACAddress = "02:5e:4c:11:22:33:" },
		"network.type: 17 characters":         func(in *evaluator.Input) { in.Network.Type = "VLANVLANVLANVLAN!" },
	} {
		beyond := in
		edit(&beyond)
		if d := decide(set, beyond); d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, field) {
			t.Errorf("decision = %q %q, want a PolicyError naming %q", d.Reason, d.Message, field)
		}
	}
}
