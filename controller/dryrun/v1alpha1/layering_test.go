package v1alpha1_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// apiPackages are the packages that declare what vmipam serves and writes for others to read:
// the dry-run API (Evaluation), the policy and record API (ClusterIPAMPolicy,
// VirtualMachineIPAM) and the record's semantics for consumers.
var apiPackages = []string{
	"github.com/vmipam/vmipam/controller/dryrun/v1alpha1",
	"github.com/vmipam/vmipam/policies/v1alpha1",
	"github.com/vmipam/vmipam/policies/consumer",
}

// apiDeps are the vmipam packages an API package may link: API packages only (the Go types of
// SDN's and the virtualization controller's kinds among them).
var apiDeps = append([]string{
	"github.com/vmipam/vmipam/crds/sdn/v1alpha1",
	"github.com/vmipam/vmipam/crds/virtualization/v1alpha2",
}, apiPackages...)

// The API packages link no internal package of vmipam: a served or written type never embeds
// the controller's or the evaluator's structs, so renaming an internal field cannot change an
// API. Before, the Evaluation's status embedded controller/plan's and the evaluator's types.
func TestAPIPackagesLinkOnlyAPIPackages(t *testing.T) {
	out, err := exec.Command("go", append([]string{"list", "-deps"}, apiPackages...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/vmipam/vmipam/") && !slices.Contains(apiDeps, dep) {
			t.Errorf("an API package links %s", dep)
		}
	}
}
