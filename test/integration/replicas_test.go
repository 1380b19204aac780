package integration

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/build"
)

var _ = Describe("Scale, replicas and restarts", func() {
	var (
		ctx context.Context
		ns  string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
	})

	// readyVMs counts the namespace's VMs whose NetworkReady is True with an address on every
	// additional interface.
	readyVMs := func() int {
		var list vmv1.VirtualMachineList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, vm := range list.Items {
			c := meta.FindStatusCondition(vm.Status.Conditions, "NetworkReady")
			if c == nil || c.Status != metav1.ConditionTrue {
				continue
			}
			ok := true
			for _, st := range vm.Status.Networks {
				ok = ok && (st.Type == vmv1.NetworkTypeMain || st.IPAddress != "")
			}
			if ok {
				n++
			}
		}
		return n
	}

	It("gives 100 VMs × 2 pooled networks exactly 200 unique addresses and settles", func() {
		calls := newCallCounter(ns)
		swapVMIPAM(hooked(calls.hook))
		a := pooledClusterNetworkNamed(ctx, ns+"-a", "10.20.0.0/24")
		b := pooledClusterNetworkNamed(ctx, ns+"-b", "10.21.0.0/24")
		createConcurrently(ctx, 100, func(i int) client.Object {
			return build.VM(ns, fmt.Sprintf("vm-%03d", i), build.OnClusterNetwork(a, ""), build.OnClusterNetwork(b, ""))
		})
		Eventually(readyVMs, 3*timeout, 500*time.Millisecond).Should(Equal(100))

		ips := ipAddresses(ctx, ns)
		Expect(ips).To(HaveLen(200))
		perNetwork := map[string]map[string]bool{}
		for _, ip := range ips {
			Expect(ip.Spec.Type).To(Equal(sdnv1.IPAddressTypeAuto))
			set := perNetwork[ip.Spec.NetworkRef.Name]
			if set == nil {
				set = map[string]bool{}
				perNetwork[ip.Spec.NetworkRef.Name] = set
			}
			Expect(set).NotTo(HaveKey(ip.Status.Address), "address %s given twice", ip.Status.Address)
			set[ip.Status.Address] = true
		}
		Expect(perNetwork[a]).To(HaveLen(100))
		Expect(perNetwork[b]).To(HaveLen(100))

		By("no hot loop: over a window longer than any periodic requeue, at most one reconcile per VM")
		// FreshPendingGrace (5 s) and the conflict retry (1 s) are the periodic requeues of a VM
		// whose networks are Ready; a loop on either shows as two or more reconciles of a VM in
		// the window. A requeue scheduled once earlier (UnansweredGrace) shows as one.
		settled()
		before := calls.total(func(c *callCounter) map[string]int { return c.reconciles })
		time.Sleep(2*plan.FreshPendingGrace + 2*time.Second)
		window := calls.total(func(c *callCounter) map[string]int { return c.reconciles }) - before
		AddReportEntry("reconciles of 100 settled VMs in the window", window)
		Expect(window).To(BeNumerically("<=", 100))
	})

	It("keeps one stable Auto IPAddress per VM, bounded writes and no conflict with two controller replicas running", func() {
		calls := newCallCounter(ns)
		swapVMIPAM(hooked(calls.hook))
		second := startManagerWith(vmipamConfig, hooked(calls.hook), setupVMIPAM)
		defer second.stop()
		corp := pooledClusterNetwork(ctx, ns, "10.22.0.0/24")
		createConcurrently(ctx, 30, func(i int) client.Object {
			return build.VM(ns, fmt.Sprintf("vm-%02d", i), build.OnClusterNetwork(corp, ""))
		})
		Eventually(readyVMs, 2*timeout, interval).Should(Equal(30))
		uids := func() map[string]types.UID {
			out := map[string]types.UID{}
			for _, ip := range ipAddresses(ctx, ns) {
				out[ip.Name] = ip.UID
			}
			return out
		}
		first := uids()
		Expect(first).To(HaveLen(30))
		settled()
		Expect(uids()).To(Equal(first), "an IPAddress was deleted and created again")
		// Per VM: its IPAddress and its record (create, then the patch once SDN answered) — a
		// few conflict retries on top, from two replicas writing the same record.
		vm, most := calls.most()
		AddReportEntry("most writes of one VM", fmt.Sprintf("%s: %d", vm, most))
		Expect(most).To(BeNumerically("<=", 12), "VM %s: %d writes", vm, most)
		var evs eventsv1.EventList
		Expect(k8s.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		for _, e := range evs.Items {
			Expect(e.Reason).NotTo(Equal(plan.ReasonIPAddressConflict), "%s: %s", e.Regarding.Name, e.Note)
		}
	})

	It("converges after a controller restart without leaking or deleting what live VMs use", func() {
		corp := pooledClusterNetwork(ctx, ns, "10.23.0.0/24")
		create(ctx, build.StaticIPAddress(ns, "s", "ClusterNetwork", corp, "10.23.0.50"))
		for _, n := range []string{"keep", "delete", "edit"} {
			create(ctx, build.VM(ns, n, build.OnClusterNetwork(corp, "")))
		}
		Eventually(readyVMs, timeout, interval).Should(Equal(3))
		kept := getIPAddress(ctx, ns, naming.AutoIPAddress("keep", "ClusterNetwork", corp))

		stopVMIPAM()
		restarted := false
		defer func() {
			if !restarted {
				startVMIPAM()
			}
		}()
		create(ctx, build.VM(ns, "new", build.OnClusterNetwork(corp, "")))
		Expect(k8s.Delete(ctx, getVM(ctx, ns, "delete"))).To(Succeed())
		updateVM(ctx, ns, "edit", func(vm *vmv1.VirtualMachine) { vm.Spec.Networks[1].IPAddressName = "s" })
		startVMIPAM()
		restarted = true

		Eventually(func() []string { return names(ipAddresses(ctx, ns)) }, timeout, interval).Should(ConsistOf(
			"s", naming.AutoIPAddress("keep", "ClusterNetwork", corp), naming.AutoIPAddress("new", "ClusterNetwork", corp)))
		Eventually(readyVMs, timeout, interval).Should(Equal(3))
		Expect(getIPAddress(ctx, ns, kept.Name).UID).To(Equal(kept.UID), "a live VM's IPAddress is untouched")
		Expect(statusAddress(ctx, ns, "edit", vmv1.NetworkTypeClusterNetwork, corp)).To(Equal("10.23.0.50"))
	})
})

// createConcurrently creates n objects from 10 goroutines, as a burst of users would.
func createConcurrently(ctx context.Context, n int, obj func(int) client.Object) {
	GinkgoHelper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 10 {
				errs <- k8s.Create(ctx, obj(i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		Expect(err).NotTo(HaveOccurred())
	}
}
