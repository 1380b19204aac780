package vmruntime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// maxGenerateName is the longest GenerateName that leaves room for the API server's five
// random characters within a 63-character name.
const maxGenerateName = 58

// vmKind is the GroupVersionKind of VirtualMachine, for owner references.
var vmKind = virtv1.GroupVersion.WithKind("VirtualMachine")

// launcherPod is a new launcher pod for vm, with a copy of vm's networks-spec annotation and
// the extra annotations.
func launcherPod(vm *virtv1.VirtualMachine, extra map[string]string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       vm.Namespace,
			GenerateName:    generateName(vm.Name),
			Labels:          map[string]string{virtv1.LabelLauncherVMName: vm.Name},
			Annotations:     map[string]string{},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, vmKind)},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: LauncherImage}}},
	}
	if spec, ok := vm.Annotations[sdnv1.AnnotationNetworksSpec]; ok {
		pod.Annotations[sdnv1.AnnotationNetworksSpec] = spec
	}
	for k, v := range extra {
		pod.Annotations[k] = v
	}
	return pod
}

// generateName is "virt-launcher-<vm>-", cut to maxGenerateName.
func generateName(vm string) string {
	prefix := "virt-launcher-" + vm + "-"
	if len(prefix) > maxGenerateName {
		prefix = prefix[:maxGenerateName]
	}
	return prefix
}

// createLauncher creates a launcher pod for vm; see launcherPod.
func (s *Simulator) createLauncher(ctx context.Context, vm *virtv1.VirtualMachine, extra map[string]string) (*corev1.Pod, error) {
	pod := launcherPod(vm, extra)
	if err := s.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating launcher pod of VM %s: %w", klog.KObj(vm), err)
	}
	s.expect.expectCreated(client.ObjectKeyFromObject(vm), *pod, s.now())
	return pod, nil
}

// observePods lists the launcher pods labelled with vm's name that are not being deleted, oldest
// first: those vm controls, and stale ones controlled by an earlier VM of the same name.
func (s *Simulator) observePods(ctx context.Context, vm *virtv1.VirtualMachine) (own, stale []corev1.Pod, err error) {
	pods, err := s.labelledPods(ctx, vm.Namespace, vm.Name)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pods {
		switch owner := controllingVM(&p); {
		case owner == nil:
		case owner.UID == vm.UID:
			own = append(own, p)
		default:
			stale = append(stale, p)
		}
	}
	return own, stale, nil
}

// indexVMName is the cache index of launcher pods by the VM name in their
// vm.kubevirt.io/name label.
const indexVMName = "vmruntime.vmipam.test/vm"

// vmNameOf is the index function of indexVMName.
func vmNameOf(o client.Object) []string {
	if name := o.GetLabels()[virtv1.LabelLauncherVMName]; name != "" {
		return []string{name}
	}
	return nil
}

// labelledPods lists the pods labelled as launchers of VM name that are not being deleted,
// oldest first: from the cache, through indexVMName, corrected by the stand-in's expectations.
func (s *Simulator) labelledPods(ctx context.Context, namespace, name string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := s.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{indexVMName: name})
	if err != nil {
		return nil, fmt.Errorf("listing launcher pods of VM %s/%s: %w", namespace, name, err)
	}
	pods := s.expect.apply(types.NamespacedName{Namespace: namespace, Name: name}, list.Items, s.now())
	pods = slices.DeleteFunc(pods, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return pods, nil
}

// controllingVM is pod's controller owner reference when it is a VirtualMachine.
func controllingVM(pod *corev1.Pod) *metav1.OwnerReference {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != vmKind.Kind || ref.APIVersion != vmKind.GroupVersion().String() {
		return nil
	}
	return ref
}

// deletePods deletes pods; ones already gone are fine.
func (s *Simulator) deletePods(ctx context.Context, pods []corev1.Pod) error {
	for i := range pods {
		if err := client.IgnoreNotFound(s.Client.Delete(ctx, &pods[i])); err != nil {
			return fmt.Errorf("deleting launcher pod %s: %w", klog.KObj(&pods[i]), err)
		}
		vm := types.NamespacedName{Namespace: pods[i].Namespace, Name: pods[i].Labels[virtv1.LabelLauncherVMName]}
		s.expect.expectDeleted(vm, pods[i], s.now())
	}
	return nil
}

// collectPods deletes the launcher pods of the deleted VM key, as the garbage collector would.
func (s *Simulator) collectPods(ctx context.Context, key types.NamespacedName) error {
	pods, err := s.labelledPods(ctx, key.Namespace, key.Name)
	if err != nil {
		return err
	}
	return s.deletePods(ctx, slices.DeleteFunc(pods, func(p corev1.Pod) bool { return controllingVM(&p) == nil }))
}

// migrationTarget is the target pod of a migration under way among pods: one whose
// AnnotationMigrationSource names another of them.
func migrationTarget(pods []corev1.Pod) *corev1.Pod {
	for i := range pods {
		src := pods[i].Annotations[AnnotationMigrationSource]
		if src != "" && slices.ContainsFunc(pods, func(p corev1.Pod) bool { return p.Name == src }) {
			return &pods[i]
		}
	}
	return nil
}

// migrationLeft is how long the migration to target still runs, at now, given its duration.
func migrationLeft(target *corev1.Pod, duration time.Duration, now time.Time) time.Duration {
	started, err := time.Parse(time.RFC3339Nano, target.Annotations[AnnotationMigrationStarted])
	if err != nil {
		return 0
	}
	return started.Add(duration).Sub(now)
}
