package rbac_test

import (
	"slices"
	"testing"

	"github.com/vmipam/vmipam/crds/rbac"
)

func TestClusterRolesAreTheDocumentedOnes(t *testing.T) {
	roles, err := rbac.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range roles {
		names = append(names, r.Name)
		if r.Kind != "ClusterRole" || len(r.Rules) == 0 {
			t.Errorf("%s: kind %q with %d rules, want a ClusterRole with rules", r.Name, r.Kind, len(r.Rules))
		}
	}
	want := []string{rbac.ClusterRoleEvaluator, rbac.ClusterRolePolicyEvaluator, rbac.ClusterRoleRecordViewer, rbac.ClusterRoleRecordConsumer}
	if !slices.Equal(names, want) {
		t.Errorf("ClusterRoles = %v, want %v", names, want)
	}
}
