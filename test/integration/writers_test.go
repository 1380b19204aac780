package integration

import (
	"context"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/test/build"
)

// hookedClient is a client whose calls can be intercepted by a spec: before runs before every
// Get ("get"), Create, Patch, Delete and status Patch ("patch-status") and may fail it.
type hookedClient struct {
	client.Client
	before func(ctx context.Context, verb string, obj client.Object, patch client.Patch) error
}

func (c hookedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	if err := c.before(ctx, "get", obj, nil); err != nil {
		return err
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c hookedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.before(ctx, "create", obj, nil); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c hookedClient) Status() client.SubResourceWriter {
	return hookedStatus{SubResourceWriter: c.Client.Status(), before: c.before}
}

// hookedStatus is the status writer of a hookedClient.
type hookedStatus struct {
	client.SubResourceWriter
	before func(ctx context.Context, verb string, obj client.Object, patch client.Patch) error
}

func (w hookedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.before(ctx, "patch-status", obj, patch); err != nil {
		return err
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (c hookedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.before(ctx, "patch", obj, patch); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c hookedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.before(ctx, "delete", obj, nil); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

// hooked returns a wrap function for swapVMIPAM that installs before.
func hooked(before func(ctx context.Context, verb string, obj client.Object, patch client.Patch) error) func(client.Client) client.Client {
	return func(c client.Client) client.Client { return hookedClient{Client: c, before: before} }
}

// callCounter counts, per VM of one namespace, the reconciles (the reconciler's Get of the VM)
// and the writes (creates, patches, status patches, deletes of the VM, its pods and its
// IPAddresses) of the vmipam controllers whose clients it hooks.
type callCounter struct {
	ns                 string
	mu                 sync.Mutex
	reconciles, writes map[string]int
}

func newCallCounter(ns string) *callCounter {
	return &callCounter{ns: ns, reconciles: map[string]int{}, writes: map[string]int{}}
}

// hook is the before function of a hookedClient.
func (c *callCounter) hook(_ context.Context, verb string, obj client.Object, _ client.Patch) error {
	if obj.GetNamespace() != c.ns {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := obj.(type) {
	case *vmv1.VirtualMachine:
		if verb == "get" {
			c.reconciles[o.Name]++
		} else {
			c.writes[o.Name]++
		}
	case *corev1.Pod:
		c.writes[o.Labels[vmv1.LabelLauncherVMName]]++
	case *sdnv1.IPAddress:
		if ref := metav1.GetControllerOf(o); ref != nil && verb != "get" {
			c.writes[ref.Name]++
		}
	}
	return nil
}

// total sums one of the counters.
func (c *callCounter) total(m func(*callCounter) map[string]int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range m(c) {
		n += v
	}
	return n
}

// most returns the VM with the most writes and their number.
func (c *callCounter) most() (string, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vm, n := "", 0
	for k, v := range c.writes {
		if v > n {
			vm, n = k, v
		}
	}
	return vm, n
}

// missingIPAddresses returns, for every running launcher pod of the namespace, the IPAddress
// names its networks-spec carries that do not exist: the invariant "no address is lost under a
// live guest" holds when it is empty.
func missingIPAddresses(ctx context.Context, ns string) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{vmv1.LabelLauncherVMName})).To(Succeed())
	exists := map[string]bool{}
	for _, ip := range ipAddresses(ctx, ns) {
		exists[ip.Name] = true
	}
	var out []string
	for i := range pods.Items {
		for _, e := range networksSpec(&pods.Items[i]) {
			for _, n := range e.IPAddressNames {
				if !exists[n] {
					out = append(out, pods.Items[i].Name+" names missing "+n)
				}
			}
		}
	}
	return out
}

// refusalCounter counts the status patches of a client that the API server refused as a
// conflict: 409, or 422 for a failed JSON patch test.
type refusalCounter struct {
	mu sync.Mutex
	n  int
}

func (r *refusalCounter) count() int { r.mu.Lock(); defer r.mu.Unlock(); return r.n }
func (r *refusalCounter) reset()     { r.mu.Lock(); defer r.mu.Unlock(); r.n = 0 }

// wrap returns c with its status patches counted.
func (r *refusalCounter) wrap(c client.Client) client.Client { return refusingClient{Client: c, r: r} }

type refusingClient struct {
	client.Client
	r *refusalCounter
}

func (c refusingClient) Status() client.SubResourceWriter {
	return refusingStatus{SubResourceWriter: c.Client.Status(), r: c.r}
}

type refusingStatus struct {
	client.SubResourceWriter
	r *refusalCounter
}

func (w refusingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		w.r.mu.Lock()
		w.r.n++
		w.r.mu.Unlock()
	}
	return err
}

var _ = Describe("Concurrent writers never lose a guest's address", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.60.0.0/24", "10.60.0.10-10.60.0.40")
	})
	podEntry := func(vm string) func() *sdnv1.NetworksSpecEntry { return onlyPodEntry(ctx, ns, vm, corp) }

	It("reconciles a new VM at most three times from creation to settled, beside the virtualization controller's writes", func() {
		calls := newCallCounter(ns)
		swapVMIPAM(hooked(calls.hook))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(HavePrefix("True/"))
		settled()
		// One as the VM is created (its IPAddress created), one as SDN answers (the record), at
		// most one as its launcher pod starts or gets the interface; the virtualization
		// controller's status writes and vmipam's own writes bring none.
		calls.mu.Lock()
		defer calls.mu.Unlock()
		GinkgoWriter.Printf("reconciles of one VM: %d\n", calls.reconciles["v"])
		Expect(calls.reconciles["v"]).To(BeNumerically("<=", 3))
	})

	It("keeps the old network's IPAddress while the running pod names it and the new one waits for SDN", func() {
		create(ctx, build.ClusterNetwork(ns+"-slow", ns+"-no-such-pool"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(podEntry("v"), timeout, interval).ShouldNot(BeNil())
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].Name = ns + "-slow" })
		Consistently(func() []string { return missingIPAddresses(ctx, ns) }, "3s", 50*time.Millisecond).Should(BeEmpty())
	})

	// terminatingWithoutItsNetwork starts VM v on corp with its Auto IPAddress, keeps its
	// launcher pod with finalizer, stops the VM until the pod is terminating, removes the
	// network from the spec until the next boot drops it, and returns the pod.
	terminatingWithoutItsNetwork := func(finalizer string) corev1.Pod {
		GinkgoHelper()
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
		pod := onePod(ctx, ns, "v")
		addFinalizer(ctx, keyOf(ns, pod.Name), finalizer)
		DeferCleanup(func() { removeFinalizer(context.Background(), keyOf(ns, pod.Name), finalizer) })

		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.RunPolicy = vmv1.RunPolicyAlwaysOff })
		Eventually(func() *metav1.Time { // the guest shuts down on the address it has
			live := &corev1.Pod{}
			Expect(k8s.Get(ctx, keyOf(ns, pod.Name), live)).To(Succeed())
			return live.DeletionTimestamp
		}, timeout, interval).ShouldNot(BeNil())
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "v") }, timeout, interval).Should(BeEmpty())
		return pod
	}

	It("keeps an Auto IPAddress that a terminating launcher pod still names", func() {
		const finalizer = "vmipam.test/guest-shutting-down"
		pod := terminatingWithoutItsNetwork(finalizer)
		Consistently(func() []string { return missingIPAddresses(ctx, ns) }, "2s", interval).Should(BeEmpty())
		removeFinalizer(ctx, keyOf(ns, pod.Name), finalizer)
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(BeEmpty())
	})

	It("lets an Auto IPAddress go once the terminating launcher pod that names it has finished, though the pod is not yet deleted", func() {
		const finalizer = "vmipam.test/pod-kept-after-it-finished"
		pod := terminatingWithoutItsNetwork(finalizer)
		Consistently(func() []string { return missingIPAddresses(ctx, ns) }, "1s", interval).Should(BeEmpty(), "the terminating pod still holds it")

		By("the guest has shut down: the pod's phase is Succeeded (the kubelet's write), its finalizer still keeps it")
		Eventually(func() error {
			live := &corev1.Pod{}
			if err := k8s.Get(ctx, keyOf(ns, pod.Name), live); err != nil {
				return err
			}
			live.Status.Phase = corev1.PodSucceeded
			return k8s.Status().Update(ctx, live)
		}, timeout, interval).Should(Succeed())
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(BeEmpty())
		Expect(k8s.Get(ctx, keyOf(ns, pod.Name), &corev1.Pod{})).To(Succeed(), "the finished pod still exists")
	})

	It("keeps an Auto IPAddress for ReleaseGrace, so that a launcher pod made from an older read of the template still finds it", func() {
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		auto := naming.AutoIPAddress("v", "ClusterNetwork", corp)
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
		read := onePod(ctx, ns, "v") // a pod creator's read of the template: a restart is about to replace the pod

		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "v") }, timeout, interval).Should(BeEmpty())
		late := latePod(getVM(ctx, ns, "v"), &read)
		create(ctx, late) // the restart's new pod, made from the template as it was read before the removal
		Consistently(func() []string { return missingIPAddresses(ctx, ns) }, plan.ReleaseGrace/2, interval).Should(BeEmpty())
		// The hotplug takes the interface off the late pod as well; the IPAddress goes a grace later.
		Eventually(func() []string { return networksSpecNames(getPod(ctx, ns, late.Name)) }, timeout, interval).Should(BeEmpty())
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(BeEmpty())
	})

	It("never gives a running VM's static IPAddress to a copy made in the same second", func() {
		create(ctx, build.StaticIPAddress(ns, "ip-s", "ClusterNetwork", corp, "10.60.0.30"))
		sameSecond(ctx, build.VM(ns, "vm-s", build.OnClusterNetwork(corp, "ip-s")),
			build.VM(ns, "vm-a", build.WithRunPolicy(vmv1.RunPolicyAlwaysOff)))
		Eventually(podEntry("vm-s"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("ip-s")))
		Eventually(func() string { return statusAddress(ctx, ns, "vm-s", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).Should(Equal("10.60.0.30"))

		updateVM(ctx, ns, "vm-a", func(vm *vmv1.VirtualMachine) { // kubectl get -o yaml, edit the name, apply
			vm.Spec.RunPolicy = vmv1.RunPolicyAlwaysOn
			vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: corp, IPAddressName: "ip-s"})
		})
		Eventually(readyOf(ctx, ns, "vm-a"), timeout, interval).Should(ContainSubstring("IPAddressInUse: IPAddress ip-s is in use by VM vm-s"))
		Eventually(podEntry("vm-a"), timeout, interval).Should(BeNil())
		Consistently(podEntry("vm-s"), "2s", interval).Should(HaveField("IPAddressNames", ConsistOf("ip-s")))
		Expect(readyOf(ctx, ns, "vm-s")()).To(HavePrefix("True/"))
	})

	It("reports the address of the IPAddress a kept NIC carries, not the one the spec asks for", func() {
		create(ctx, build.StaticIPAddress(ns, "ip-a", "ClusterNetwork", corp, "10.60.0.31"),
			build.StaticIPAddress(ns, "ip-b", "ClusterNetwork", corp, "10.60.0.32"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "ip-a")), build.VM(ns, "w", build.OnClusterNetwork(corp, "")))
		auto := naming.AutoIPAddress("w", "ClusterNetwork", corp)
		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf("ip-a")))
		Eventually(podEntry("w"), timeout, interval).Should(HaveField("IPAddressNames", ConsistOf(auto)))
		Eventually(func() string { return statusAddress(ctx, ns, "w", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).ShouldNot(BeEmpty())
		wAddress := statusAddress(ctx, ns, "w", vmv1.NetworkTypeClusterNetwork, corp)

		setNetworkReady(ctx, corp, metav1.ConditionFalse)
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(ContainSubstring(": NetworkNotReady: "))
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "ip-b" })
		updateVM(ctx, ns, "w", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "ip-a" })
		waitApplied(ctx, ns, "w")
		waitApplied(ctx, ns, "v")
		Expect(podEntry("v")()).To(HaveField("IPAddressNames", ConsistOf("ip-a")), "the NIC is kept as it was")
		Expect(statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal("10.60.0.31"))
		Expect(statusAddress(ctx, ns, "w", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal(wAddress))
	})

	It("attaches a new VM's NICs to its first pod even when the policy forbids hotplug", func() {
		policy := namespacePolicy(ns, "change.kind == 'None'")
		create(ctx, policy)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })
		stopVMIPAM()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				startVMIPAM()
			}
		})
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		pod := onePod(ctx, ns, "v")
		Expect(networksSpec(&pod)).To(BeEmpty(), "the pod started before vmipam wrote the VM's record")
		startVMIPAM()
		restarted = true

		Eventually(podEntry("v"), timeout, interval).Should(HaveField("IPAddressNames",
			ConsistOf(naming.AutoIPAddress("v", "ClusterNetwork", corp))))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(HavePrefix("True/"))
		Expect(condition(ctx, ns, "v", consumer.ConditionAwaitingRestart)).To(BeNil())
		Expect(onePod(ctx, ns, "v").UID).To(Equal(pod.UID))
	})

	It("never says NetworkReady while the running pod lacks a NIC that waits for a restart", func() {
		policy := namespacePolicy(ns, "change.kind == 'None'")
		create(ctx, policy)
		DeferCleanup(func() { Expect(k8s.Delete(context.Background(), policy)).To(Succeed()) })
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(podEntry("v"), timeout, interval).ShouldNot(BeNil())
		other := pooledClusterNetworkNamed(ctx, ns+"-other", "10.61.0.0/24")
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) {
			vm.Spec.Networks = append(vm.Spec.Networks, vmv1.NetworksSpec{Type: vmv1.NetworkTypeClusterNetwork, Name: other})
		})
		Eventually(func() *metav1.Condition { return condition(ctx, ns, "v", consumer.ConditionAwaitingRestart) },
			timeout, interval).ShouldNot(BeNil())
		Expect(readyOf(ctx, ns, "v")()).To(HavePrefix("False/"))
		Expect(readyOf(ctx, ns, "v")()).To(ContainSubstring("ClusterNetwork/" + other + ": "))
	})

	It("applies the record while IPAddress deletes are refused", func() {
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(func() string { return statusAddress(ctx, ns, "v", vmv1.NetworkTypeClusterNetwork, corp) },
			timeout, interval).ShouldNot(BeEmpty())
		swapVMIPAM(hooked(func(_ context.Context, verb string, obj client.Object, _ client.Patch) error {
			if _, ok := obj.(*sdnv1.IPAddress); ok && verb == "delete" {
				return errors.New("refused for this spec")
			}
			return nil
		}))
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(podEntry("v"), timeout, interval).Should(BeNil())
		waitApplied(ctx, ns, "v")
		Expect(getVM(ctx, ns, "v").Status.Networks).To(HaveLen(1))
		Expect(ipAddresses(ctx, ns)).To(HaveLen(1), "the delete is still refused")
	})
})

// sameSecond creates the objects with one creationTimestamp (a second's resolution), retrying
// until the API server stamped them alike.
func sameSecond(ctx context.Context, objs ...client.Object) {
	GinkgoHelper()
	for attempt := 0; ; attempt++ {
		Expect(attempt).To(BeNumerically("<", 10), "could not create %d objects within one second", len(objs))
		create(ctx, objs...)
		stamps := map[string]bool{}
		for _, o := range objs {
			stamps[o.GetCreationTimestamp().String()] = true
		}
		if len(stamps) == 1 {
			return
		}
		for _, o := range objs {
			Expect(k8s.Delete(ctx, o)).To(Succeed())
			Eventually(func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(o), o) }, timeout, interval).ShouldNot(Succeed())
			o.SetResourceVersion("")
			o.SetUID("")
			o.SetCreationTimestamp(metav1.Time{})
		}
	}
}

// removeFinalizer removes finalizer from the pod, if the pod still exists.
// addFinalizer adds finalizer to the pod at key, retrying on conflict: the stand-ins and
// vmipam write the launcher pod too (its networks-spec and networks-status).
func addFinalizer(ctx context.Context, key client.ObjectKey, finalizer string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, key, pod); err != nil {
			return err
		}
		pod.Finalizers = append(pod.Finalizers, finalizer)
		return k8s.Update(ctx, pod)
	})).To(Succeed())
}

func removeFinalizer(ctx context.Context, key client.ObjectKey, finalizer string) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod := &corev1.Pod{}
		if err := k8s.Get(ctx, key, pod); err != nil {
			return client.IgnoreNotFound(err)
		}
		kept := pod.Finalizers[:0]
		for _, f := range pod.Finalizers {
			if f != finalizer {
				kept = append(kept, f)
			}
		}
		pod.Finalizers = kept
		return k8s.Update(ctx, pod)
	})).To(Succeed())
}

// latePod is the launcher pod a slower pod creator makes for vm from the template as it read it
// earlier, when it was what the running pod read carries: with read's networks-spec and
// decided mark. Its owner reference is not the controller reference: the
// virtualization-controller stand-in keeps exactly one pod it controls per running VM and
// would delete either this pod or its own; like VC without a KVVMI, it applies the record to
// every non-terminating launcher pod of the VM, this one too.
func latePod(vm *vmv1.VirtualMachine, read *corev1.Pod) *corev1.Pod {
	ref := *metav1.NewControllerRef(vm, vmv1.GroupVersion.WithKind("VirtualMachine"))
	ref.Controller = nil
	annotations := map[string]string{}
	for _, k := range []string{sdnv1.AnnotationNetworksSpec, consumer.AnnotationDecided} {
		if v, ok := read.Annotations[k]; ok {
			annotations[k] = v
		}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: "virt-launcher-" + vm.Name + "-late",
		Labels:          map[string]string{vmv1.LabelLauncherVMName: vm.Name},
		Annotations:     annotations,
		OwnerReferences: []metav1.OwnerReference{ref}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "stand-in"}}}}
}

// networksSpecNames lists the IPAddress names o's networks-spec carries.
func networksSpecNames(o client.Object) []string {
	var out []string
	for _, e := range networksSpec(o) {
		out = append(out, e.IPAddressNames...)
	}
	return out
}
