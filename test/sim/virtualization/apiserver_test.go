package virtualization

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
)

// TestStandInHearsOfLauncherPodsAsVCDoes holds the stand-in to how the real VC hears of
// launcher pods (virtualization-controller.md §1–§2; its PodWatcher maps a pod to its VM by
// the vm.kubevirt.io/name label, since KubeVirt's pods are controlled by the KVVMI, not the
// VM), on a real API server, a subtest per case, each with a VM of its own.
func TestStandInHearsOfLauncherPodsAsVCDoes(t *testing.T) {
	e := env.StartForTest(t, env.Options{})
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	runStandIn(t, e, c)
	t.Run("a pod no VM controls is woken by its label and gets the record", func(t *testing.T) { podNoVMControls(t, c) })
	t.Run("a pod someone else deletes while a finalizer keeps it is replaced", func(t *testing.T) { podHeldByFinalizer(t, c) })
	t.Run("SDN's answer on a pod brings the KVVM that waited for it", func(t *testing.T) { kvvmWaitsForSDN(t, c) })
}

// kvvmWaitsForSDN: a hotplug on a running VM patches its pod, and the KVVM waits — no
// template write, no observedGeneration, ConfigurationApplied False — until SDN's
// networks-status on the pod (written here, as SDN would) reports the new interface; that
// write wakes the VM (VC's PodWatcher lets networks-status changes through) and the KVVM
// follows.
func kvvmWaitsForSDN(t *testing.T, c client.Client) {
	g := NewWithT(t)
	ctx := context.Background()
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hp"},
		Spec: virtv1.VirtualMachineSpec{RunPolicy: virtv1.RunPolicyAlwaysOn,
			Networks: []virtv1.NetworksSpec{{Type: virtv1.NetworkTypeMain}, onCorp("corp"), onCorp("lan")}}}
	g.Expect(c.Create(ctx, vm)).To(Succeed())
	key := client.ObjectKeyFromObject(vm)
	decide(t, c, vm.Name, attached("corp", "10.0.0.5"))
	var pod corev1.Pod
	carries := func(g Gomega) string {
		pod = onlyLauncherPod(ctx, g, c, "hp")
		return pod.Annotations[sdnv1.AnnotationNetworksSpec]
	}
	template := func(g Gomega) string {
		kvvm := newUnstructured(KVVMKind)
		g.Expect(c.Get(ctx, key, kvvm)).To(Succeed())
		annotations, _, _ := unstructured.NestedStringMap(kvvm.Object, "spec", "template", "metadata", "annotations")
		return annotations[sdnv1.AnnotationNetworksSpec]
	}
	record := func(g Gomega) ipamv1.VirtualMachineIPAMStatus {
		rec := &ipamv1.VirtualMachineIPAM{}
		g.Expect(c.Get(ctx, key, rec)).To(Succeed())
		return rec.Status
	}
	configurationApplied := func(g Gomega) *metav1.Condition {
		got := &virtv1.VirtualMachine{}
		g.Expect(c.Get(ctx, key, got)).To(Succeed())
		return meta.FindStatusCondition(got.Status.Conditions, ConditionConfigurationApplied)
	}
	answer := func(nics ...sdnv1.NetworksStatusEntry) {
		raw, err := json.Marshal(nics)
		g.Expect(err).NotTo(HaveOccurred())
		base := pod.DeepCopy()
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, sdnv1.AnnotationNetworksStatus, string(raw))
		g.Expect(c.Patch(ctx, &pod, client.MergeFrom(base))).To(Succeed())
	}

	g.Eventually(carries, 30*time.Second, 100*time.Millisecond).Should(ContainSubstring(`"corp-ip"`))
	answer(configuredNIC("corp"))
	g.Eventually(record, 15*time.Second, 100*time.Millisecond).Should(HaveField("ObservedGeneration", int64(1)))

	decide(t, c, vm.Name, attached("corp", "10.0.0.5"), attached("lan", "10.0.1.5"))
	g.Eventually(configurationApplied, 15*time.Second, 100*time.Millisecond).Should(And(Not(BeNil()),
		HaveField("Status", metav1.ConditionFalse), HaveField("Message", MessageWaitingForSDN)),
		"the VM shows ConfigurationApplied False while its KVVM waits for SDN")
	g.Expect(carries(g)).To(ContainSubstring(`"lan-ip"`), "the running pod is patched first")
	g.Consistently(template, 2*time.Second, 100*time.Millisecond).ShouldNot(ContainSubstring(`"lan-ip"`),
		"the KVVM waits for SDN")
	g.Expect(record(g).ObservedGeneration).To(Equal(int64(1)), "the record is not observed while the KVVM waits")

	answer(configuredNIC("corp"), configuredNIC("lan"))
	g.Eventually(template, 15*time.Second, 100*time.Millisecond).Should(ContainSubstring(`"lan-ip"`))
	g.Eventually(record, 15*time.Second, 100*time.Millisecond).Should(HaveField("ObservedGeneration", int64(2)))
	g.Eventually(configurationApplied, 15*time.Second, 100*time.Millisecond).Should(BeNil())
}

// podNoVMControls: a labelled pod that no VM controls — made by a slower pod creator from an
// older read of the template — appears after the VM has settled, and its creation alone must
// bring the record's networks-spec onto it. Nothing else wakes the VM: no SDN runs, and the
// record attaches no interface, so the stand-in waits for no networks-status. With the
// stand-in's earlier watch (the VM's controller reference) nothing brought it.
func podNoVMControls(t *testing.T, c client.Client) {
	g := NewWithT(t)
	ctx := context.Background()

	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "v"},
		Spec: virtv1.VirtualMachineSpec{RunPolicy: virtv1.RunPolicyAlwaysOn,
			Networks: []virtv1.NetworksSpec{{Type: virtv1.NetworkTypeMain},
				{Type: virtv1.NetworkTypeClusterNetwork, Name: "corp", IPAddressName: "ip-a"}}}}
	g.Expect(c.Create(ctx, vm)).To(Succeed())
	decide(t, c, vm.Name, ipamv1.InterfaceDecision{Type: "ClusterNetwork", Name: "corp", Allocation: ipamv1.AllocationStatic,
		IPAddressName: "ip-a", Attach: true, Hotplug: true})
	var read corev1.Pod // a slower pod creator's read of the template, carrying ip-a
	running := func(g Gomega) string {
		read = onlyLauncherPod(ctx, g, c, "v")
		return read.Annotations[sdnv1.AnnotationNetworksSpec]
	}
	g.Eventually(running, 30*time.Second, 100*time.Millisecond).Should(ContainSubstring(`"ip-a"`))
	carried := read.Annotations[sdnv1.AnnotationNetworksSpec]

	decide(t, c, vm.Name) // the interface goes: the running pod loses it
	g.Eventually(running, 30*time.Second, 100*time.Millisecond).ShouldNot(ContainSubstring(`"ip-a"`))
	time.Sleep(2 * time.Second) // the stand-in settles: nothing is left for it to do

	late := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "virt-launcher-v-late",
		Labels:      map[string]string{virtv1.LabelLauncherVMName: "v"},
		Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: carried}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "stand-in"}}}}
	g.Expect(c.Create(ctx, late)).To(Succeed())
	g.Eventually(func() (string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(late), late)
		return late.Annotations[sdnv1.AnnotationNetworksSpec], err
	}, 15*time.Second, 100*time.Millisecond).ShouldNot(ContainSubstring(`"ip-a"`),
		"the late pod's creation must wake its VM, which applies the record to every launcher pod of it")
}

// podHeldByFinalizer: someone else deletes a running VM's launcher pod while a finalizer keeps
// it (a guest shutting down, a backup hook): the stand-in, whose envtest runs no kubelet to
// change the pod's phase, must hear of the deletion itself and start a replacement.
func podHeldByFinalizer(t *testing.T, c client.Client) {
	g := NewWithT(t)
	ctx := context.Background()
	vm := &virtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "held"},
		Spec: virtv1.VirtualMachineSpec{RunPolicy: virtv1.RunPolicyAlwaysOn}}
	g.Expect(c.Create(ctx, vm)).To(Succeed())
	pods := func(g Gomega) (live, terminating []corev1.Pod) {
		var list corev1.PodList
		g.Expect(c.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{virtv1.LabelLauncherVMName: "held"})).To(Succeed())
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			} else {
				terminating = append(terminating, p)
			}
		}
		return live, terminating
	}
	var pod corev1.Pod
	g.Eventually(func(g Gomega) {
		live, _ := pods(g)
		g.Expect(live).To(HaveLen(1))
		pod = live[0]
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	const finalizer = "vmipam.test/hold"
	pod.Finalizers = append(pod.Finalizers, finalizer)
	g.Expect(c.Update(ctx, &pod)).To(Succeed())
	t.Cleanup(func() {
		live := &corev1.Pod{}
		if c.Get(context.Background(), client.ObjectKeyFromObject(&pod), live) == nil {
			live.Finalizers = nil
			_ = c.Update(context.Background(), live)
		}
	})
	time.Sleep(time.Second) // the stand-in settles after the finalizer's write
	g.Expect(c.Delete(ctx, &pod)).To(Succeed())
	g.Eventually(func(g Gomega) {
		live, terminating := pods(g)
		g.Expect(terminating).To(HaveLen(1))
		g.Expect(live).To(HaveLen(1), "a replacement launcher pod")
	}, 15*time.Second, 100*time.Millisecond).Should(Succeed())
}

// runStandIn runs the virtualization-controller stand-in alone in a manager of its own, cached
// as where it runs beside vmipam, until the test ends.
func runStandIn(t *testing.T, e *env.Environment, c client.Client) {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: c.Scheme(), Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	s := New(nil)
	s.RecheckSDN = time.Hour // only SDN's answer may wake a VM whose KVVM waits (kvvmWaitsForSDN)
	if err := s.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	sim.RunForTest(t, mgr)
}

// onlyLauncherPod is the one launcher pod of VM vm in namespace default; g fails unless there
// is exactly one.
func onlyLauncherPod(ctx context.Context, g Gomega, c client.Client, vm string) corev1.Pod {
	var pods corev1.PodList
	g.Expect(c.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{virtv1.LabelLauncherVMName: vm})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	return pods.Items[0]
}
