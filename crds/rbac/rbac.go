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
	// ClusterRoleRecordViewer lets its subjects read decision records (aggregated into view).
	ClusterRoleRecordViewer = "vmipam:records:viewer"
	// ClusterRoleRecordConsumer is the virtualization controller's: read decision records and
	// write their status.
	ClusterRoleRecordConsumer = "vmipam:records:consumer"
)

//go:embed *.yaml
var files embed.FS

// Files are the files of the shipped ClusterRoles: the dry run's callers' and the records'.
var Files = []string{"dryrun.yaml", "records.yaml"}

// ClusterRoles returns the shipped ClusterRoles of Files, fresh copies on every call.
func ClusterRoles() ([]*rbacv1.ClusterRole, error) {
	var out []*rbacv1.ClusterRole
	for _, name := range Files {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		docs, err := manifest.Split(data)
		if err != nil {
			return nil, fmt.Errorf("crds/rbac/%s: %w", name, err)
		}
		for _, doc := range docs {
			role := &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(doc.JSON, role); err != nil {
				return nil, fmt.Errorf("crds/rbac/%s: document %d: %w", name, doc.Index, err)
			}
			out = append(out, role)
		}
	}
	return out, nil
}
