package sdn_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
)

const (
	timeout  = 30 * time.Second
	interval = 100 * time.Millisecond
)

// TestStandInFollowsTheDocumentedSDN holds the stand-in to what sdn.md documents of SDN, a
// subtest per documented behaviour, on a real API server and only through objects, as vmipam
// and users see SDN.
func TestStandInFollowsTheDocumentedSDN(t *testing.T) {
	e := env.StartThirdParty(t)
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{c: c, cfg: e, scheme: scheme}
	t.Run("allocations and exhaustion carry SDN's reasons", h.reasons)
	t.Run("a pool without ranges gives all but the network and broadcast addresses", h.wholeCIDR)
	t.Run("an orphaned lease keeps its address from any name for its ttl, across a restart", h.leases)
	t.Run("Attached and usedByPods follow the launcher pods the address is configured in", h.attached)
}

// harness is what the subtests share.
type harness struct {
	c      client.Client
	cfg    *env.Environment
	scheme *runtime.Scheme
}

// standIn runs the SDN stand-in alone in a manager of its own (cached as where it runs beside
// vmipam) until the returned stop, which waits for it to end.
func (h *harness) standIn(t *testing.T) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(h.cfg.Config, ctrl.Options{Scheme: h.scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sdn.New(nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	return sim.RunForTest(t, mgr)
}

func ptr[T any](v T) *T { return &v }

// network creates a ClusterIPAddressPool and a ClusterNetwork on it, both named name.
func (h *harness) network(t *testing.T, name string, ttl time.Duration, subnets ...sdnv1.Subnet) {
	t.Helper()
	pool := &sdnv1.ClusterIPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sdnv1.IPAddressPoolSpec{Pools: subnets}}
	if ttl > 0 {
		pool.Spec.LeaseTTL = &metav1.Duration{Duration: ttl}
	}
	cn := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sdnv1.ClusterNetworkSpec{
		IPAM: &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindClusterIPAddressPool, Name: name}}}}
	h.create(t, pool, cn)
}

// create creates objs.
func (h *harness) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := h.c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// auto is an Auto IPAddress in namespace default on ClusterNetwork network.
func auto(name, network string) *sdnv1.IPAddress {
	return &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: sdnv1.IPAddressSpec{
		Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: network}}}
}

// static is a Static IPAddress for ip in namespace default on ClusterNetwork network.
func static(name, network, ip string) *sdnv1.IPAddress {
	s := auto(name, network)
	s.Spec.Type, s.Spec.Static = sdnv1.IPAddressTypeStatic, &sdnv1.StaticIP{IP: ip}
	return s
}

// get reads the IPAddress default/name; an empty one when it does not exist.
func (h *harness) get(name string) *sdnv1.IPAddress {
	ip := &sdnv1.IPAddress{}
	_ = h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, ip)
	return ip
}

// allocated is "reason address" of the Allocated condition of default/name: what a user reads.
func (h *harness) allocated(name string) func() string {
	return func() string {
		ip := h.get(name)
		c := meta.FindStatusCondition(ip.Status.Conditions, sdnv1.ConditionAllocated)
		if c == nil {
			return ""
		}
		return string(c.Status) + " " + c.Reason + " " + ip.Status.Address
	}
}

// address is the address of default/name once SDN allocated it (phase Allocated), whatever
// the reason it gives: the subtests of the other behaviours do not depend on the reasons.
func (h *harness) address(name string) func() string {
	return func() string {
		if ip := h.get(name); ip.Status.Phase == sdnv1.IPAddressPhaseAllocated {
			return ip.Status.Address
		}
		return ""
	}
}

func (h *harness) reasons(t *testing.T) {
	g := NewWithT(t)
	h.standIn(t)
	h.network(t, "reasons", 0, sdnv1.Subnet{Network: "10.60.0.0/24", Ranges: []string{"10.60.0.10-10.60.0.10"}})
	h.create(t, auto("reasons-a", "reasons"))
	g.Eventually(h.allocated("reasons-a"), timeout, interval).Should(Equal("True IPAddressAllocated 10.60.0.10"))
	h.create(t, auto("reasons-b", "reasons"))
	g.Eventually(h.allocated("reasons-b"), timeout, interval).Should(Equal("False NoFreeIPAddress "))
}

func (h *harness) wholeCIDR(t *testing.T) {
	g := NewWithT(t)
	h.standIn(t)
	h.network(t, "cidr30", 0, sdnv1.Subnet{Network: "10.61.0.0/30"})
	h.network(t, "cidr31", 0, sdnv1.Subnet{Network: "10.61.1.0/31"})
	h.network(t, "cidr32", 0, sdnv1.Subnet{Network: "10.61.2.7/32"})
	addresses := func(names ...string) func() []string {
		return func() []string {
			var out []string
			for _, n := range names {
				out = append(out, h.address(n)())
			}
			return out
		}
	}
	pending := func(name string) func() sdnv1.IPAddressPhase {
		return func() sdnv1.IPAddressPhase { return h.get(name).Status.Phase }
	}
	h.create(t, auto("cidr30-a", "cidr30"), auto("cidr30-b", "cidr30"))
	g.Eventually(addresses("cidr30-a", "cidr30-b"), timeout, interval).Should(ConsistOf("10.61.0.1", "10.61.0.2"),
		"a /30: its two hosts, the first included (no gateway)")
	h.create(t, auto("cidr30-c", "cidr30"))
	g.Eventually(pending("cidr30-c"), timeout, interval).Should(Equal(sdnv1.IPAddressPhasePending))
	g.Consistently(pending("cidr30-c"), "1s", interval).Should(Equal(sdnv1.IPAddressPhasePending), "a /30: never its network or broadcast address")

	h.create(t, auto("cidr31-a", "cidr31"), auto("cidr31-b", "cidr31"))
	g.Eventually(addresses("cidr31-a", "cidr31-b"), timeout, interval).Should(ConsistOf("10.61.1.0", "10.61.1.1"), "a /31: both addresses (RFC 3021)")
	h.create(t, auto("cidr32-a", "cidr32"))
	g.Eventually(h.address("cidr32-a"), timeout, interval).Should(Equal("10.61.2.7"), "a /32: its one address")
}

// lease returns the IPAddressLease of ip, nil when there is none.
func (h *harness) lease(ip string) *sdnv1.IPAddressLease {
	list := &sdnv1.IPAddressLeaseList{}
	if err := h.c.List(context.Background(), list); err != nil {
		return nil
	}
	for i := range list.Items {
		if list.Items[i].Spec.IP == ip {
			return &list.Items[i]
		}
	}
	return nil
}

func (h *harness) leases(t *testing.T) {
	g := NewWithT(t)
	const ttl = 8 * time.Second
	stop := h.standIn(t)
	h.network(t, "lease", ttl, sdnv1.Subnet{Network: "10.62.0.0/24", Ranges: []string{"10.62.0.10-10.62.0.11"}})
	h.create(t, auto("lease-a", "lease"))
	g.Eventually(h.address("lease-a"), timeout, interval).Should(Equal("10.62.0.10"))
	g.Eventually(func() *sdnv1.IPAddressLease { return h.lease("10.62.0.10") }, timeout, interval).Should(And(
		HaveField("Spec.TTL", Equal(&metav1.Duration{Duration: ttl})),
		HaveField("Status.OrphaningTimestamp", BeNil())), "one lease per allocated address, with the pool's leaseTTL")

	g.Expect(h.c.Delete(context.Background(), h.get("lease-a"))).To(Succeed())
	var orphaned time.Time
	g.Eventually(func() *metav1.Time {
		if l := h.lease("10.62.0.10"); l != nil && l.Status.OrphaningTimestamp != nil {
			orphaned = l.Status.OrphaningTimestamp.Time
			return l.Status.OrphaningTimestamp
		}
		return nil
	}, timeout, interval).ShouldNot(BeNil(), "the lease of a deleted IPAddress is orphaned")

	stop() // SDN restarts: the lease must hold the address all the same
	h.standIn(t)
	h.create(t, auto("lease-b", "lease"))
	g.Eventually(h.address("lease-b"), timeout, interval).Should(Equal("10.62.0.11"), "Auto passes over the leased address")
	h.create(t, static("lease-a", "lease", "10.62.0.10")) // the same name as the address's last holder
	g.Eventually(func() sdnv1.IPAddressPhase { return h.get("lease-a").Status.Phase }, timeout, interval).Should(Equal(sdnv1.IPAddressPhasePending))
	g.Expect(time.Now()).To(BeTemporally("<", orphaned.Add(ttl)), "too slow to see the lease hold: the test proves nothing")
	g.Eventually(h.address("lease-a"), ttl+timeout, interval).Should(Equal("10.62.0.10"))
	c := meta.FindStatusCondition(h.get("lease-a").Status.Conditions, sdnv1.ConditionAllocated)
	g.Expect(c.LastTransitionTime.Time).To(BeTemporally(">=", orphaned.Add(ttl)), "allocated before the lease expired")
	g.Eventually(func() *sdnv1.IPAddressLease { return h.lease("10.62.0.10") }, timeout, interval).Should(
		HaveField("Status.OrphaningTimestamp", BeNil()), "the address's new holder has a lease of its own")
}

func (h *harness) attached(t *testing.T) {
	g := NewWithT(t)
	h.standIn(t)
	h.network(t, "attach", 0, sdnv1.Subnet{Network: "10.63.0.0/24"})
	h.create(t, auto("attach-a", "attach"))
	g.Eventually(h.address("attach-a"), timeout, interval).ShouldNot(BeEmpty())
	attachment := func() string {
		ip := h.get("attach-a")
		out := "-"
		if c := meta.FindStatusCondition(ip.Status.Conditions, sdnv1.ConditionAttached); c != nil {
			out = string(c.Status)
		}
		for _, raw := range ip.Status.UsedByPods {
			var p sdnv1.PodRef
			_ = json.Unmarshal(raw.Raw, &p)
			out += " " + p.Namespace + "/" + p.Name
		}
		return out
	}
	g.Consistently(attachment, "1s", interval).Should(Equal("-"), "no pod carries the address yet")

	spec, _ := json.Marshal([]sdnv1.NetworksSpecEntry{{Type: "ClusterNetwork", Name: "attach", IfName: "veth_a",
		IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{"attach-a"}}})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "virt-launcher-vm-x1",
		Labels:      map[string]string{virtv1.LabelLauncherVMName: "vm"},
		Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: string(spec)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "compute"}}}}
	h.create(t, pod)
	g.Eventually(attachment, timeout, interval).Should(Equal("True default/virt-launcher-vm-x1"))

	g.Expect(h.c.Delete(context.Background(), pod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(attachment, timeout, interval).Should(Equal("False"))
}
