package integration

import (
	"context"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/build"
)

var _ = Describe("Skip reasons and contested addresses", func() {
	var (
		ctx      context.Context
		ns, corp string
	)
	BeforeEach(func() {
		ctx, ns, corp = pooledWorld("10.3.0.0/24", "10.3.0.10-10.3.0.12")
	})
	address := func(vm string) func() string {
		return func() string { return statusAddress(ctx, ns, vm, vmv1.NetworkTypeClusterNetwork, corp) }
	}

	It("skips ipAddressName on a pool-less network with NoIPAMPool", func() {
		create(ctx, build.ClusterNetwork(ns+"-l2", ""))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(ns+"-l2", "x")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(Equal("False/NetworkNotReady: ClusterNetwork/" + ns +
			"-l2: NoIPAMPool: ipAddressName x is set, but ClusterNetwork " + ns + "-l2 has no IPAM pool"))
	})

	It("skips a static IPAddress bound to another network with IPAddressNetworkMismatch", func() {
		other := pooledClusterNetworkNamed(ctx, ns+"-other", "10.4.0.0/24")
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", other, "10.4.0.5"))
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "s")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(ContainSubstring(
			"ClusterNetwork/" + corp + ": IPAddressNetworkMismatch: IPAddress s belongs to ClusterNetwork " + other))
	})

	It("lets the current holder keep a contested static IPAddress and gives it to the newcomer on release", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.3.0.12"))
		create(ctx, build.VM(ns, "holder", build.OnClusterNetwork(corp, "s")))
		Eventually(address("holder"), timeout, interval).Should(Equal("10.3.0.12"))

		create(ctx, build.VM(ns, "newcomer", build.OnClusterNetwork(corp, "s")))
		Eventually(readyOf(ctx, ns, "newcomer"), timeout, interval).Should(Equal("False/NetworkNotReady: ClusterNetwork/" + corp +
			": IPAddressInUse: IPAddress s is in use by VM holder"))
		Consistently(address("holder"), "2s", interval).Should(Equal("10.3.0.12"), "the holder is not disturbed")
		Expect(readyOf(ctx, ns, "holder")()).To(HavePrefix("True/"))
		Expect(address("newcomer")()).To(BeEmpty())

		By("the holder releases it")
		updateVM(ctx, ns, "holder", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(address("newcomer"), timeout, interval).Should(Equal("10.3.0.12"))
		Eventually(readyOf(ctx, ns, "newcomer"), timeout, interval).Should(HavePrefix("True/"))
		Expect(nextBoot(ctx, ns, "holder")).To(BeEmpty())
	})

	It("gives a stopped holder's static IPAddress to the VM waiting for it when the holder lets it go", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.3.0.12"))
		create(ctx, build.VM(ns, "holder", build.OnClusterNetwork(corp, "s")))
		Eventually(address("holder"), timeout, interval).Should(Equal("10.3.0.12"))
		updateVM(ctx, ns, "holder", func(vm *vmv1.VirtualMachine) { vm.Spec.RunPolicy = vmv1.RunPolicyAlwaysOff })
		Eventually(func() []corev1.Pod { return launcherPods(ctx, ns, "holder") }, timeout, interval).Should(BeEmpty())
		create(ctx, build.VM(ns, "newcomer", build.OnClusterNetwork(corp, "s")))
		Eventually(readyOf(ctx, ns, "newcomer"), timeout, interval).Should(ContainSubstring("IPAddressInUse: IPAddress s is in use by VM holder"))

		By("the holder, with no pod to wake anyone, lets it go: its record hands s over instead of attaching it")
		updateVM(ctx, ns, "holder", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(address("newcomer"), timeout, interval).Should(Equal("10.3.0.12"))
		Eventually(readyOf(ctx, ns, "newcomer"), timeout, interval).Should(HavePrefix("True/"))
	})

	It("hands a released static IPAddress over only after ReleaseGrace, so that the releaser's late pod never shares it", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.3.0.12"))
		create(ctx, build.VM(ns, "holder", build.OnClusterNetwork(corp, "s")))
		Eventually(address("holder"), timeout, interval).Should(Equal("10.3.0.12"))
		create(ctx, build.VM(ns, "newcomer", build.OnClusterNetwork(corp, "s")))
		Eventually(readyOf(ctx, ns, "newcomer"), timeout, interval).Should(ContainSubstring("IPAddressInUse: IPAddress s is in use by VM holder"))
		read := onePod(ctx, ns, "holder") // a pod creator's read of the template: a restart is about to replace the pod

		updateVM(ctx, ns, "holder", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "holder") }, timeout, interval).Should(BeEmpty())
		create(ctx, latePod(getVM(ctx, ns, "holder"), &read)) // the restart's new pod, made from the template read before the release
		carriers := func() []string {                         // the VMs a launcher pod of which carries s
			var out []string
			for _, vm := range []string{"holder", "newcomer"} {
				if slices.ContainsFunc(launcherPods(ctx, ns, vm), func(p corev1.Pod) bool { return slices.Contains(networksSpecNames(&p), "s") }) {
					out = append(out, vm)
				}
			}
			return out
		}
		Consistently(func() int { return len(carriers()) }, plan.ReleaseGrace/2, interval).Should(BeNumerically("<=", 1), "two guests carry one address")
		Eventually(address("newcomer"), timeout, interval).Should(Equal("10.3.0.12"))
		Expect(carriers()).To(HaveLen(1))
	})

	It("holds a released static IPAddress for ReleaseGrace also against a copy of the releaser created just after", func() {
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.3.0.12"))
		create(ctx, build.VM(ns, "holder", build.OnClusterNetwork(corp, "s")))
		Eventually(address("holder"), timeout, interval).Should(Equal("10.3.0.12"))
		updateVM(ctx, ns, "holder", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(func() []sdnv1.NetworksSpecEntry { return nextBoot(ctx, ns, "holder") }, timeout, interval).Should(BeEmpty())
		released := time.Now()
		create(ctx, build.VM(ns, "copy", build.OnClusterNetwork(corp, "s"), build.WithRunPolicy(vmv1.RunPolicyAlwaysOff))) // kubectl get -o yaml, renamed
		Eventually(func() string { return attachedIn(ctx, ns, "copy", vmv1.NetworkTypeClusterNetwork, corp) }, timeout, interval).Should(Equal("s"))
		Expect(time.Since(released)).To(BeNumerically(">=", plan.ReleaseGrace-time.Second), "handed over before ReleaseGrace")
	})

	It("refuses another VM's Auto IPAddress named as static with IPAddressOwnedByAnotherVM", func() {
		create(ctx, build.VM(ns, "owner", build.OnClusterNetwork(corp, "")))
		Eventually(address("owner"), timeout, interval).ShouldNot(BeEmpty())
		auto := naming.AutoIPAddress("owner", "ClusterNetwork", corp)
		create(ctx, build.VM(ns, "thief", build.OnClusterNetwork(corp, auto)))
		Eventually(readyOf(ctx, ns, "thief"), timeout, interval).Should(ContainSubstring(
			"IPAddressOwnedByAnotherVM: IPAddress " + auto + " is the automatic address of VM owner"))
		Expect(names(ipAddresses(ctx, ns))).To(ConsistOf(auto))
	})

	It("skips VMs beyond an exhausted pool with PoolExhausted and hot-plugs exactly one when space frees", func() {
		for _, n := range []string{"v1", "v2", "v3", "v4", "v5"} {
			create(ctx, build.VM(ns, n, build.OnClusterNetwork(corp, "")))
		}
		addressed := func() (with, exhausted []string) {
			for _, n := range []string{"v1", "v2", "v3", "v4", "v5"} {
				vm := &vmv1.VirtualMachine{}
				if err := k8s.Get(ctx, keyOf(ns, n), vm); err != nil || vm.DeletionTimestamp != nil {
					continue // deleted
				}
				if address(n)() != "" {
					with = append(with, n)
				} else if strings.Contains(describe(networkReady(ctx, ns, n)), ": PoolExhausted: ") {
					exhausted = append(exhausted, n)
				}
			}
			return
		}
		Eventually(func() [2]int { w, e := addressed(); return [2]int{len(w), len(e)} }, timeout, interval).Should(Equal([2]int{3, 2}))
		with, waiting := addressed()
		pods := map[string]string{}
		for _, n := range waiting {
			pods[n] = string(onePod(ctx, ns, n).UID)
		}

		Expect(k8s.Delete(ctx, getVM(ctx, ns, with[0]))).To(Succeed())
		Eventually(func() []string {
			_, e := addressed()
			return e
		}, timeout, interval).Should(HaveLen(1))
		Consistently(func() []string { _, e := addressed(); return e }, "2s", interval).Should(HaveLen(1), "exactly one got the address")
		for n, uid := range pods {
			Expect(string(onePod(ctx, ns, n).UID)).To(Equal(uid), "VM %s not restarted", n)
		}
	})

	It("never deletes a user's IPAddress that carries the VM UID label without being owned", func() {
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(address("v"), timeout, interval).ShouldNot(BeEmpty())
		fake := build.StaticIPAddress(ns, "decoy", "ClusterNetwork", corp, "10.3.0.12")
		fake.Labels = map[string]string{plan.LabelVMUID: string(getVM(ctx, ns, "v").UID)}
		fake.Spec.Type = sdnv1.IPAddressTypeAuto
		fake.Spec.Static = nil
		create(ctx, fake)
		updateVM(ctx, ns, "v", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks = vm.Spec.Networks[:1] })
		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(ConsistOf("decoy"))
		Consistently(func() []string { return names(ipAddresses(ctx, ns)) }, "2s", interval).Should(ConsistOf("decoy"))
	})

	It("reports an object squatting on the Auto name as IPAddressConflict and never adopts it", func() {
		squat := build.StaticIPAddress(ns, naming.AutoIPAddress("v", "ClusterNetwork", corp), "ClusterNetwork", corp, "10.3.0.12")
		create(ctx, squat)
		create(ctx, build.VM(ns, "v", build.OnClusterNetwork(corp, "")))
		Eventually(readyOf(ctx, ns, "v"), timeout, interval).Should(ContainSubstring(": IPAddressConflict: IPAddress " + squat.Name +
			" already exists and is not controlled by VM v, and vmipam does not adopt it"))
		Expect(getIPAddress(ctx, ns, squat.Name).OwnerReferences).To(BeEmpty())
	})
})
