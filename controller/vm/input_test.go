package vm

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// The policy input is built in one place for every front end, and leaves out kubectl's
// last-applied-configuration as the controller's cache does: before, the dry run and ipamctl
// evaluate, which take a manifest as written, showed it to policies and the controller did
// not, so a policy reading it decided differently offline. The VM itself is not changed (it
// may be the cache's object).
func TestThePolicyInputLeavesOutLastAppliedConfiguration(t *testing.T) {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"kind":"VirtualMachine"}`, "team": "a"}}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "ClusterNetwork", Name: "corp"}}
	s := &scope{vm: vm}
	it := &iface{index: 0, spec: vm.Spec.Networks[0], key: "ClusterNetwork/corp", dupOf: -1, network: &networkInfo{exists: true}}
	in := input(s, it, nil)
	if _, ok := in.VM.Annotations[corev1.LastAppliedConfigAnnotation]; ok || in.VM.Annotations["team"] != "a" {
		t.Errorf("input annotations %v, want team without last-applied-configuration", in.VM.Annotations)
	}
	if _, ok := vm.Annotations[corev1.LastAppliedConfigAnnotation]; !ok {
		t.Error("building the input removed last-applied-configuration from the VM object")
	}
	if got := vmInput(vm).Annotations; len(got) != 1 || got["team"] != "a" {
		t.Errorf("vmInput (removed interfaces) annotations %v, want only team", got)
	}
}
