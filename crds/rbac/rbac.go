package rbac

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
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
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*rbacv1.ClusterRole
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		role := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict(doc, role); err != nil {
			return nil, fmt.Errorf("crds/rbac/dryrun.yaml: %w", err)
		}
		if role.Name != "" {
			out = append(out, role)
		}
	}
}
