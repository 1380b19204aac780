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
	// ClusterRoleEvaluator lets its subjects dry-run VMs in a namespace: create evaluations
	// (bind it per namespace; it is aggregated into admin and edit).
	ClusterRoleEvaluator = "vmipam:dryrun:evaluator"
	// ClusterRolePolicyEvaluator lets its subjects have candidate policies evaluated: the
	// custom verb evaluate on clusteripampolicies.
	ClusterRolePolicyEvaluator = "vmipam:dryrun:policy-evaluator"
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
