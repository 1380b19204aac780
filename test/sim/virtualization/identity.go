package virtualization

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ServiceAccount the stand-in runs as where a suite tests vmipam's admission policies: the
// Deckhouse virtualization controller's, which is the chart's default records.consumers.
const (
	ServiceAccountNamespace = "d8-virtualization"
	ServiceAccountName      = "virtualization-controller"
)

// roleName is the stand-in's ClusterRole.
const roleName = "vc-stand-in"

// Identity returns the objects that give the stand-in its identity: its namespace and
// ServiceAccount, and a ClusterRole (bound to it) with what the stand-in writes and reads as
// VC does — VMs (their status by Update, their power-state annotation), operations, launcher
// pods, KVVMs, and the controller references it sets (blockOwnerDeletion needs update on the
// VM's finalizers). Reading decision records and writing their status is the chart's
// vmipam:records:consumer role, which the chart binds to records.consumers.
func Identity() []client.Object {
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"virtualization.deckhouse.io"}, Resources: []string{"virtualmachines"}, Verbs: append(read, "patch")},
		{APIGroups: []string{"virtualization.deckhouse.io"}, Resources: []string{"virtualmachines/status"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"virtualization.deckhouse.io"}, Resources: []string{"virtualmachines/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{"virtualization.deckhouse.io"}, Resources: []string{"virtualmachineoperations"}, Verbs: read},
		{APIGroups: []string{"virtualization.deckhouse.io"}, Resources: []string{"virtualmachineoperations/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: append(read, "create", "delete", "patch")},
		{APIGroups: []string{KVVMKind.Group}, Resources: []string{"internalvirtualizationvirtualmachines"},
			Verbs: append(read, "create", "update", "delete")},
	}}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ServiceAccountNamespace, Name: ServiceAccountName}},
		role,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleName},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ServiceAccountNamespace, Name: ServiceAccountName}}},
	}
}
