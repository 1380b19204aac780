package rbac

import (
	"embed"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/internal/manifest"
)

// Names of the shipped ClusterRoles.
const (
	// ClusterRoleVirtualMachines lets its subjects dry-run VMs: create virtualmachines.
	ClusterRoleVirtualMachines = "vmipam:dryrun:virtualmachines"
	// ClusterRolePolicies lets its subjects dry-run candidate policies: create clusteripampolicies.
	ClusterRolePolicies = "vmipam:dryrun:clusteripampolicies"
	// ClusterRoleDelegator lets the controller create TokenReviews and SubjectAccessReviews.
	ClusterRoleDelegator = "vmipam:dryrun:delegator"
)

//go:embed *.yaml
var files embed.FS

// ClusterRoles returns the shipped ClusterRoles, fresh copies on every call.
func ClusterRoles() ([]*rbacv1.ClusterRole, error) {
	data, err := files.ReadFile("dryrun.yaml")
	if err != nil {
		return nil, err
	}
	docs, err := manifest.Split(data)
	if err != nil {
		return nil, fmt.Errorf("crds/rbac/dryrun.yaml: %w", err)
	}
	out := make([]*rbacv1.ClusterRole, 0, len(docs))
	for _, doc := range docs {
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(doc.JSON, role); err != nil {
			return nil, fmt.Errorf("crds/rbac/dryrun.yaml: document %d: %w", doc.Index, err)
		}
		out = append(out, role)
	}
	return out, nil
}
