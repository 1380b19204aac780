package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestSlimLauncherPodKeepsWhatVMIPAMReads(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-web-abcde", ResourceVersion: "7",
			Labels:            map[string]string{"vm.kubevirt.io/name": "web"},
			Annotations:       map[string]string{"network.deckhouse.io/networks-spec": `[{"type":"Network","name":"corp"}]`},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "VirtualMachine", Name: "web", UID: "uid-web"}},
			DeletionTimestamp: &now,
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "virt-controller"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher",
			Env: []corev1.EnvVar{{Name: "BIG", Value: "…"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.9",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "compute", Ready: true}}},
	}
	out, err := slimLauncherPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	slim := out.(*corev1.Pod)
	if slim.Name != pod.Name || slim.ResourceVersion != "7" || slim.Labels["vm.kubevirt.io/name"] != "web" ||
		slim.Annotations["network.deckhouse.io/networks-spec"] == "" || len(slim.OwnerReferences) != 1 ||
		slim.DeletionTimestamp == nil || slim.Status.Phase != corev1.PodRunning {
		t.Errorf("slim pod lost what vmipam reads: %+v", slim)
	}
	if len(slim.ManagedFields) != 0 || len(slim.Spec.Containers) != 0 || slim.Status.PodIP != "" || len(slim.Status.ContainerStatuses) != 0 {
		t.Errorf("slim pod kept what vmipam never reads: managedFields %v, spec %+v, status %+v", slim.ManagedFields, slim.Spec, slim.Status)
	}

	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: pod}
	if got, err := slimLauncherPod(tombstone); err != nil || got != any(tombstone) {
		t.Errorf("a tombstone is passed through unchanged, got %v, %v", got, err)
	}
}
