package dryrun_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/controller/dryrun"
)

const vmOnCorp = `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: Main}, {type: ClusterNetwork, name: corp}]}}
`

func TestDecodeNamesThePlaceOfEveryProblem(t *testing.T) {
	e := newEngine(t)
	cases := []struct {
		name, body string
		want       []string // each a "<field>: <message part>" that must appear
	}{
		{"empty body", "", []string{"body: Required value"}},
		{"invalid YAML", "vm: {metadata: {name: a\n  bad: [", []string{"body: Invalid value: not valid JSON or YAML: yaml: line"}},
		{"not an object", "- a\n- b\n", []string{"body: Invalid value: must be an object"}},
		{"unknown top-level field", vmOnCorp + "vms: []\n", []string{"vms: Invalid value: unknown field"}},
		{"policies not a list", vmOnCorp + "policies: {}\n", []string{"policies: Invalid value: must be a list, not object"}},
		{"no vm", "objects: []\n", []string{"vm: Required value"}},
		{"an unsupported network type", `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: Main}, {type: Bogus, name: x}]}}`,
			[]string{`vm.spec.networks[1].type: Unsupported value: "Bogus"`}},
		{"a VM without networks", `vm: {metadata: {name: web, namespace: demo}, spec: {}}`,
			[]string{"vm.spec.networks: Required value: the VM has no additional network"}},
		{"a VM with only Main", `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [{type: Main}]}}`,
			[]string{"vm.spec.networks: Required value"}},
		{"a VM without namespace", `vm: {metadata: {name: web}, spec: {networks: [{type: Network, name: lan}]}}`,
			[]string{"vm.metadata.namespace: Required value"}},
		{"a VM with a bad name", `vm: {metadata: {name: Web_1, namespace: demo}, spec: {networks: [{type: Network, name: lan}]}}`,
			[]string{`vm.metadata.name: Invalid value: "Web_1"`}},
		{"a VM of another kind", `vm: {apiVersion: v1, kind: Pod, metadata: {name: web, namespace: demo}}`,
			[]string{`vm.kind: Unsupported value: "Pod v1"`}},
		{"a policy with an unknown field and a wrong enum", vmOnCorp +
			`policies: [{metadata: {name: p}, spec: {allocation: {expression: "'Auto'"}, skipRules: [{name: a, reason: R, expression: "true", nmae: x}]}},
			            {metadata: {name: q}, spec: {failurePolicy: Sometimes, allocation: {expression: "'Auto'"}}}]`,
			[]string{"policies[0].spec.skipRules[0].nmae: Invalid value: unknown field",
				`policies[1].spec.failurePolicy: Unsupported value: "Sometimes"`}},
		{"two policies of one name", vmOnCorp +
			`policies: [{metadata: {name: p}, spec: {allocation: {expression: "'Auto'"}}}, {metadata: {name: p}, spec: {allocation: {expression: "'None'"}}}]`,
			[]string{`policies[1].metadata.name: Duplicate value: "p"`}},
		{"objects of other namespaces and kinds", vmOnCorp +
			`objects: [{apiVersion: v1, kind: Secret, metadata: {name: s}},
			  {apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: x, namespace: other}, spec: {type: Auto, networkRef: {kind: ClusterNetwork, name: corp}}},
			  {apiVersion: v1, kind: Namespace, metadata: {name: kube-system}},
			  {apiVersion: network.deckhouse.io/v1alpha1, kind: ClusterNetwork, metadata: {name: c, namespace: demo}},
			  {kind: IPAddress, metadata: {name: y}}]`,
			[]string{`objects[0].kind: Unsupported value: "Secret v1"`,
				`objects[1].metadata.namespace: Invalid value: "other": must be the VM's namespace "demo"`,
				`objects[2].metadata.name: Invalid value: "kube-system": only the VM's own Namespace "demo"`,
				"objects[3].metadata.namespace: Forbidden: the kind is cluster-scoped",
				"objects[4].apiVersion: Required value"}},
		{"an object failing its schema", vmOnCorp +
			`objects: [{apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: x}, spec: {type: Sometimes, networkRef: {kind: ClusterNetwork, name: corp}}}]`,
			[]string{`objects[0].spec.type: Unsupported value: "Sometimes"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Decode([]byte(tc.body), dryrun.DecodeOptions{})
			var inv *dryrun.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Decode error = %v, want an *InvalidError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n  %v\nwant it to contain\n  %s", err, w)
				}
			}
		})
	}
}

func TestDecodeAcceptsJSONAndFillsDefaults(t *testing.T) {
	e := newEngine(t)
	req, err := e.Decode([]byte(`{"apiVersion": "dryrun/v1alpha1", "kind": "EvaluationRequest",
		"vm": {"metadata": {"name": "web"}, "spec": {"runPolicy": "AlwaysOn", "cpu": {"cores": 1}, "unknownToTheTrimmedCRD": true,
		       "networks": [{"type": "Network", "name": "lan"}]}},
		"objects": [{"apiVersion": "network.deckhouse.io/v1alpha1", "kind": "Network", "metadata": {"name": "lan"}}]}`),
		dryrun.DecodeOptions{DefaultNamespace: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if req.VM.Namespace != "team" || req.VM.Kind != "VirtualMachine" || req.Policies != nil {
		t.Errorf("VM %s/%s kind %q, policies %v; want the default namespace, the kind filled, no policies", req.VM.Namespace, req.VM.Name, req.VM.Kind, req.Policies)
	}
	if len(req.Objects) != 1 || req.Objects[0].GetNamespace() != "team" {
		t.Errorf("objects = %v, want the Network in the VM's namespace", req.Objects)
	}
}

func TestCheckPolicyReportsSchemaStrictAndCompileErrorsOnce(t *testing.T) {
	e := newEngine(t)
	_, errs := e.CheckPolicy(nil, []byte(`{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
		"metadata": {"name": "p"}, "spec": {"nmae": 1, "allocation": {"expression": "'Auto'"},
		"skipRules": [{"name": "a", "reason": "lower", "expression": "ipAdress.exists"}]}}`))
	var got []string
	for _, e := range errs {
		got = append(got, e.Field)
	}
	want := []string{"spec.skipRules[0].reason", "spec.nmae", "spec.skipRules[0].expression"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("fields = %v, want %v (%v)", got, want, errs)
	}
}
