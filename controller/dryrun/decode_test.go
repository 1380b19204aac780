package dryrun_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

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
		// The real VM CRD sets no maxItems: 30,000 interfaces in a 1 MB request made an
		// 84 MB answer and took the controller from 352 MB to 1.3 GB.
		{"more interfaces than a dry run answers", `vm: {metadata: {name: web, namespace: demo}, spec: {networks: [` +
			strings.Repeat(`{type: Network, name: lan}, `, dryrun.MaxInterfaces+1) + `]}}`,
			[]string{"vm.spec.networks: Too many: 257: must have at most 256 items"}},
		// Metadata is ObjectMeta for every kind: an unknown field there is known to be one
		// offline too (the API server's Strict, kubectl's default). Before, it was dropped
		// silently by ipamctl and accepted by the dry run under Strict.
		{"unknown metadata fields", `vm: {metadata: {name: web, namespace: demo, bogus: 1}, spec: {networks: [{type: Network, name: lan}]}}
objects: [{apiVersion: v1, kind: Pod, metadata: {name: p, lables: {a: b}}}]`,
			[]string{`vm.metadata.bogus: Invalid value: unknown field`, `objects[0].metadata.lables: Invalid value: unknown field`}},
		{"an unknown policy metadata field, reported once", vmOnCorp + `policies: [{metadata: {name: p, bogus: 1}, spec: {allocation: {expression: "'Auto'"}}}]`,
			[]string{`policies[0].metadata.bogus: Invalid value: unknown field`}},
		{"an object failing its schema", vmOnCorp +
			`objects: [{apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: x}, spec: {type: Sometimes, networkRef: {kind: ClusterNetwork, name: corp}}}]`,
			[]string{`objects[0].spec.type: Unsupported value: "Sometimes"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Decode(context.Background(), []byte(tc.body), dryrun.DecodeOptions{})
			var inv *dryrun.InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("Decode error = %v, want an *InvalidError", err)
			}
			for _, w := range tc.want {
				if n := strings.Count(err.Error(), w); n != 1 {
					t.Errorf("error\n  %v\nwant it to contain once (%d times)\n  %s", err, n, w)
				}
			}
		})
	}
}

func TestDecodeAcceptsJSONAndFillsDefaults(t *testing.T) {
	e := newEngine(t)
	req, err := e.Decode(context.Background(), []byte(`{
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

func TestDecodeReportsEveryProblemAtOnce(t *testing.T) {
	e := newEngine(t)
	body := `vm: {metadata: {name: Web_1, namespace: demo}, spec: {networks: [{type: Main}, {type: Bogus, name: x}]}}
policies:
- {metadata: {name: p}, spec: {allocation: {expression: "'Auto'"}, skipRules: [{name: a, reason: R, expression: "ipAdress.exists"}]}}
- {metadata: {name: q}, spec: {failurePolicy: Sometimes, allocation: {expression: "vm.nmae"}}}
objects:
- {apiVersion: network.deckhouse.io/v1alpha1, kind: IPAddress, metadata: {name: x, namespace: other}, spec: {type: Sometimes, networkRef: {kind: ClusterNetwork, name: corp}}}
`
	_, err := e.Decode(context.Background(), []byte(body), dryrun.DecodeOptions{})
	var inv *dryrun.InvalidError
	if !errors.As(err, &inv) {
		t.Fatalf("Decode error = %v, want an *InvalidError", err)
	}
	got := map[string]bool{}
	for _, e := range inv.Errs {
		got[e.Field] = true
	}
	for _, want := range []string{
		"vm.metadata.name", "vm.spec.networks[1].type", // the VM: metadata and schema
		"policies[0].spec.skipRules[0].expression",                                 // a compile error
		"policies[1].spec.failurePolicy", "policies[1].spec.allocation.expression", // schema and compile errors of another policy
		"objects[0].spec.type", "objects[0].metadata.namespace", // an object: schema and placement
	} {
		if !got[want] {
			t.Errorf("no error at %s; got %v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "policies[1].spec.failurePolicy"); n != 1 {
		t.Errorf("policies[1].spec.failurePolicy reported %d times, want once (schema and compiler both check it): %v", n, err)
	}
}

func TestDecodeChecksObjectsWhenTheVMIsUnusable(t *testing.T) {
	e := newEngine(t)
	_, err := e.Decode(context.Background(), []byte(`vm: {apiVersion: v1, kind: Pod, metadata: {name: web}}
objects: [{apiVersion: v1, kind: Secret, metadata: {name: s}}, {apiVersion: network.deckhouse.io/v1alpha1, kind: Network, metadata: {name: lan}}]
`), dryrun.DecodeOptions{})
	if err == nil || !strings.Contains(err.Error(), "vm.kind: Unsupported value") || !strings.Contains(err.Error(), `objects[0].kind: Unsupported value: "Secret v1"`) {
		t.Errorf("Decode error = %v, want the VM's kind and objects[0]'s kind reported together", err)
	}
	if strings.Contains(err.Error(), "objects[1]") {
		t.Errorf("Decode error = %v, want no error for a Network without a namespace (it would get the VM's)", err)
	}
}

func TestDecodeAsksAuthorizeBeforeCompiling(t *testing.T) {
	e := newEngine(t)
	broken := `policies: [{metadata: {name: p}, spec: {allocation: {expression: "ipAdress.exists"}}}]` + "\n"
	type call struct {
		namespace    string
		withPolicies bool
	}
	var calls []call
	refuse := errors.New("refused")
	deny := func(namespace string, withPolicies bool) error {
		calls = append(calls, call{namespace, withPolicies})
		return refuse
	}
	if _, err := e.Decode(context.Background(), []byte(vmOnCorp+broken), dryrun.DecodeOptions{Authorize: deny}); !errors.Is(err, refuse) {
		t.Errorf("Decode with a refusing Authorize = %v, want its error (before compiling)", err)
	}
	if len(calls) != 1 || calls[0] != (call{"demo", true}) {
		t.Errorf("Authorize calls = %+v, want one for namespace demo with policies", calls)
	}

	calls = nil
	noNamespace := `vm: {metadata: {name: web}, spec: {networks: [{type: ClusterNetwork, name: corp}]}}` + "\n"
	_, err := e.Decode(context.Background(), []byte(noNamespace+broken), dryrun.DecodeOptions{Authorize: deny})
	if len(calls) != 0 || err == nil || !strings.Contains(err.Error(), "vm.metadata.namespace: Required value") ||
		strings.Contains(err.Error(), "policies[0].spec.allocation.expression") {
		t.Errorf("without a namespace: Authorize calls %+v, error %v; want no call, the namespace reported and nothing compiled", calls, err)
	}

	allow := func(string, bool) error { return nil }
	_, err = e.Decode(context.Background(), []byte(vmOnCorp+broken), dryrun.DecodeOptions{Authorize: allow})
	if err == nil || !strings.Contains(err.Error(), "policies[0].spec.allocation.expression") {
		t.Errorf("Decode with an allowing Authorize = %v, want the compile error", err)
	}
}

func TestCandidatePoliciesGetTheCRDDefaultPriority(t *testing.T) {
	p, errs := newEngine(t).CheckPolicy(nil, []byte(`{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
		"metadata": {"name": "p"}, "spec": {"hotplug": {"expression": "true"}}}`))
	if len(errs) > 0 || p == nil || p.Spec.Priority != 100 {
		t.Errorf("CheckPolicy = %+v, %v; want priority 100 as the API server defaults it", p, errs)
	}
}

// A policy past the CRD's size bounds (an expression longer than maxLength, more items than
// maxItems) never reaches the webhook's compiler in the cluster: the API server refuses it on
// its schema first. Offline it is refused on its schema too, without compiling: an 813 KB
// policy of 13,000 regex literals took 4.1 s to lint only to be refused.
func TestCheckPolicyPastTheSchemaSizeBoundsIsNotCompiled(t *testing.T) {
	long := strings.TrimSuffix(strings.Repeat("vm.name.matches('^a') || ", 400), " || ")
	var conds []string
	for i := range 17 {
		conds = append(conds, fmt.Sprintf(`{"name": "m%d", "expression": "vm.nmae == 'x'"}`, i))
	}
	_, errs := newEngine(t).CheckPolicy(nil, []byte(`{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
		"metadata": {"name": "p"}, "spec": {"matchConditions": [`+strings.Join(conds, ",")+`],
		"skipRules": [{"name": "a", "reason": "R", "expression": "`+long+`"}]}}`))
	var types []string
	sizes := 0
	for _, e := range errs {
		types = append(types, e.Field+" "+string(e.Type))
		if e.Type == field.ErrorTypeTooMany || e.Type == field.ErrorTypeTooLong {
			sizes++
		}
	}
	if len(errs) != 2 || sizes != 2 {
		t.Errorf("errors = %v, want the two size bounds only (no compile error: nothing compiled)", types)
	}
}
