package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/crds/rbac"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// Editor is the sandbox's namespace editor: a user bound to the built-in edit role in
// Namespace and nothing else, who dry-runs VMs as any namespace user would.
const Editor = "demo-editor"

// platformReader stands in for the read roles the virtualization platform and the SDN
// module aggregate into view (so into edit and admin): what an Evaluation reads about a VM.
const platformReader = "sandbox:platform-reader"

// clusterNetworkReader stands in for the SDN module's read access to the cluster-scoped
// networks and pools, bound to every authenticated user.
const clusterNetworkReader = "sandbox:cluster-network-reader"

// installAccess installs what a cluster gives a namespace's users, as the chart and the
// platform do: the shipped dry-run ClusterRoles (crds/rbac/dryrun.yaml, which the chart ships;
// the evaluator role is aggregated into edit and admin), the platform's stand-in read roles,
// and Editor bound to edit in Namespace.
func installAccess(ctx context.Context, c client.Client) error {
	roles, err := rbac.ClusterRoles()
	if err != nil {
		return err
	}
	read := []string{"get", "list", "watch"}
	reader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: platformReader, Labels: map[string]string{
		"rbac.authorization.k8s.io/aggregate-to-view": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true",
		"rbac.authorization.k8s.io/aggregate-to-admin": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{vmv1.GroupVersion.Group}, Resources: []string{"virtualmachines"}, Verbs: read},
			{APIGroups: []string{sdnv1.GroupVersion.Group}, Resources: []string{"ipaddresses", "networks", "ipaddresspools"}, Verbs: read},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Editor},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: Editor}}}
	// the cluster-wide networks and pools are every user's to read, as the SDN module has them
	clusterReader := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: clusterNetworkReader},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{sdnv1.GroupVersion.Group}, Resources: []string{"clusternetworks", "clusteripaddresspools"}, Verbs: read}}}
	everyone := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: clusterNetworkReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterNetworkReader},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}}}
	objs := []client.Object{reader, binding, clusterReader, everyone}
	for _, r := range roles {
		objs = append(objs, r)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	return nil
}

// showEditorDryRun creates the Evaluation of evFile as Editor (impersonated with the admin
// kubeconfig, as `kubectl --as` does) and prints the command and the answer's gist. It
// retries while the aggregation controller has not yet folded the roles into edit.
func showEditorDryRun(ctx context.Context, out io.Writer, cfg *rest.Config, kubeconfig, evFile string, timeout time.Duration) error {
	fmt.Fprintf(out, "\nThe same as a namespace editor (user %s, bound to the built-in edit role in %s; the shipped\n"+
		"vmipam:dryrun:evaluator role is aggregated into it):\n"+
		"$ kubectl --kubeconfig %s --as %s create -f %s -o yaml\n", Editor, Namespace, kubeconfig, Editor, evFile)
	data, err := os.ReadFile(evFile)
	if err != nil {
		return err
	}
	ev := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &ev.Object); err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: Editor}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	evaluations := dyn.Resource(dryrunv1.SchemeGroupVersion.WithResource(dryrunv1.Resource)).Namespace(Namespace)
	deadline := time.Now().Add(timeout)
	for {
		answer, err := evaluations.Create(ctx, ev.DeepCopy(), metav1.CreateOptions{})
		switch {
		case err == nil:
			return printGist(out, answer)
		case !apierrors.IsForbidden(err) || time.Now().After(deadline):
			return fmt.Errorf("an Evaluation as %s: %w", Editor, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// printGist prints each interface's decision of an answered Evaluation, and what it omits.
func printGist(out io.Writer, answer *unstructured.Unstructured) error {
	status := &dryrunv1.EvaluationStatus{}
	raw, _, _ := unstructured.NestedMap(answer.Object, "status")
	data, err := yaml.Marshal(raw)
	if err == nil {
		err = yaml.Unmarshal(data, status)
	}
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	for _, it := range status.Interfaces {
		fmt.Fprintln(out, strings.TrimRight(fmt.Sprintf("  %s/%s: attached=%t %s", it.Type, it.Name, it.Attached, it.Reason), " "))
	}
	for _, o := range status.Omitted {
		fmt.Fprintf(out, "  status.omitted: %s\n", o) // the field, then its value
	}
	return nil
}
