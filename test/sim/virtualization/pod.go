package virtualization

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
)

// maxGenerateName is the longest GenerateName that leaves room for the API server's five
// random characters within a 63-character name.
const maxGenerateName = 58

// vmKind is the GroupVersionKind of VirtualMachine, for owner references.
var vmKind = virtv1.GroupVersion.WithKind("VirtualMachine")

// launcherPod is a new launcher pod for vm made from the KVVM template t: KubeVirt copies the
// template's annotations onto the pod it creates (VC facts §1), with the extra annotations.
func launcherPod(vm *virtv1.VirtualMachine, t *template, extra map[string]string) *corev1.Pod {
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
	for k, v := range t.annotations() {
		pod.Annotations[k] = v
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

// createLauncher creates a launcher pod for vm from the template t; see launcherPod.
func (s *Simulator) createLauncher(ctx context.Context, vm *virtv1.VirtualMachine, t *template, extra map[string]string) (*corev1.Pod, error) {
	pod := launcherPod(vm, t, extra)
	if err := s.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating launcher pod of VM %s: %w", klog.KObj(vm), err)
	}
	s.wrote(pod)
	s.expect.expectCreated(client.ObjectKeyFromObject(vm), *pod, s.now())
	return pod, nil
}

// observePods lists the launcher pods labelled with vm's name that are not being deleted, oldest
// first: those vm controls, and stale ones controlled by an earlier VM of the same name.
func (s *Simulator) observePods(ctx context.Context, vm *virtv1.VirtualMachine) (own, stale []corev1.Pod, err error) {
	own, stale, _, err = s.observeAllPods(ctx, vm)
	return own, stale, err
}

// observeAllPods is observePods with, besides, the labelled pods that no VM controls: VC
// without a KVVMI applies a record to every non-terminating launcher pod of the VM (VC facts
// §2), those too, while it starts and stops only the pods it controls.
func (s *Simulator) observeAllPods(ctx context.Context, vm *virtv1.VirtualMachine) (own, stale, others []corev1.Pod, err error) {
	pods, err := s.labelledPods(ctx, vm.Namespace, vm.Name)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, p := range pods {
		switch owner := controllingVM(&p); {
		case owner == nil:
			others = append(others, p)
		case owner.UID == vm.UID:
			own = append(own, p)
		default:
			stale = append(stale, p)
		}
	}
	return own, stale, others, nil
}

// indexVMName is the cache index of launcher pods by the VM name in their
// vm.kubevirt.io/name label.
const indexVMName = "vc-stand-in.vmipam.test/vm"

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

// AnnotationPropagated lists, on a launcher pod, the VM annotations the stand-in copied onto it
// (a JSON list of keys), so that one removed from the VM is removed from the pod too — the
// stand-in's bookkeeping, as VC keeps its last-propagated-* annotations.
const AnnotationPropagated = "vc-stand-in.vmipam.test/propagated-annotations"

// notPropagated reports whether VC's SyncMetadataHandler leaves a VM annotation off the pods:
// kubectl's own and the bookkeeping of propagation (VC facts §3).
func notPropagated(key string) bool {
	return strings.HasPrefix(key, "kubectl.kubernetes.io/") || key == AnnotationPropagated
}

// patchPod brings a running launcher pod to res, as VC does in two steps: its networks-spec
// patched to the live list (with AnnotationDecided once a record decides), then every
// annotation of the VM copied onto it — so an annotation of the same key on the VM wins —, and
// the ones it copied before and the VM no longer has removed. One JSON merge patch, only when
// something differs.
func (s *Simulator) patchPod(ctx context.Context, vm *virtv1.VirtualMachine, pod *corev1.Pod, res consumer.Result) error {
	want := map[string]*string{}
	set := func(k, v string) { want[k] = &v }
	if value := networksSpecValue(res.Live); value != "" {
		set(sdnv1.AnnotationNetworksSpec, value)
		set(AnnotationTapProvision, "true")
	} else {
		want[sdnv1.AnnotationNetworksSpec], want[AnnotationTapProvision] = nil, nil
	}
	if res.Decided {
		set(consumer.AnnotationDecided, "true")
	}
	var copied []string
	for k, v := range vm.Annotations {
		if !notPropagated(k) {
			set(k, v)
			copied = append(copied, k)
		}
	}
	var before []string
	_ = json.Unmarshal([]byte(pod.Annotations[AnnotationPropagated]), &before) // absent or unreadable: none
	for _, k := range before {
		if _, still := vm.Annotations[k]; !still && want[k] == nil {
			want[k] = nil
		}
	}
	if len(copied) == 0 {
		want[AnnotationPropagated] = nil // nothing copied: no bookkeeping (absent means none)
	} else {
		slices.Sort(copied)
		keys, _ := json.Marshal(copied)
		set(AnnotationPropagated, string(keys))
	}
	patch := map[string]any{}
	for k, v := range want {
		current, has := pod.Annotations[k]
		switch {
		case v == nil && has:
			patch[k] = nil
		case v != nil && (!has || current != *v):
			patch[k] = *v
		}
	}
	if len(patch) == 0 {
		return nil
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
	if err != nil {
		return err
	}
	if err := s.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, data)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("patching launcher pod %s: %w", klog.KObj(pod), err))
	}
	s.wrote(pod)
	return nil
}
