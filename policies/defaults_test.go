package policies_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/policies"
)

const policyDoc = `apiVersion: ipam.virtualization.deckhouse.io/v1alpha1
kind: ClusterIPAMPolicy
metadata: {name: %s}
spec: {allocation: {expression: "'None'"}}
`

func TestDecodeSkipsEmptyDocumentsAndNamesTheOthers(t *testing.T) {
	data := "# only a comment\n---\n" + strings.Replace(policyDoc, "%s", "a", 1) + "---\n" + strings.Replace(policyDoc, "%s", "b", 1)
	got, err := policies.Decode([]byte(data))
	if err != nil || len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
		t.Fatalf("Decode = %v, %v; want policies a and b", got, err)
	}
	cases := []struct{ name, data, want string }{
		{"a document without kind or name", data + "---\nspec: {priority: 1}\n", `document 3: kind "" apiVersion "", want ClusterIPAMPolicy`},
		{"an unknown field", data + "---\n" + strings.NewReplacer("spec:", "sepc:", "%s", "c").Replace(policyDoc), `document 3: unknown field "sepc"`},
		{"a syntax error", data + "---\nkind: [\n", "document 3: "},
		// A field in another case: encoding/json took Spec for spec (issue #15, tester atk18).
		{"a field in another case", data + "---\n" + strings.NewReplacer("spec:", "Spec:", "%s", "c").Replace(policyDoc), `document 3: unknown field "Spec"`},
	}
	for _, tc := range cases {
		if _, err := policies.Decode([]byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestDecodeDefaultsPriorityAsTheAPIServerDoes(t *testing.T) {
	data := strings.Replace(policyDoc, "%s", "absent", 1) + "---\n" +
		strings.Replace(strings.Replace(policyDoc, "%s", "zero", 1), "spec: {", "spec: {priority: 0, ", 1)
	got, err := policies.Decode([]byte(data))
	if err != nil || len(got) != 2 {
		t.Fatalf("Decode = %v, %v", got, err)
	}
	if got[0].Spec.Priority != 100 || got[1].Spec.Priority != 0 {
		t.Errorf("priorities = %d, %d; want 100 for an absent one (the CRD default) and 0 as written", got[0].Spec.Priority, got[1].Spec.Priority)
	}
}
