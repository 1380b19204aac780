package sdn

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

const ns = "default"

// newScheme knows core/v1 and the SDN kinds.
func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, sdnv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// newSim returns a simulator on a fake client holding objs, with a fake clock.
func newSim(t testing.TB, funcs *interceptor.Funcs, objs ...client.Object) (*Simulator, *clocktesting.FakePassiveClock) {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&sdnv1.IPAddress{}, &sdnv1.Network{}, &sdnv1.ClusterNetwork{}, &sdnv1.IPAddressLease{}).
		WithIndex(&corev1.Pod{}, indexIPAddressNames, ipAddressNamesOf).
		WithIndex(&corev1.Pod{}, indexConfiguredIPAddresses, configuredIPAddressesOf).
		WithIndex(&sdnv1.IPAddressLease{}, indexLeaseIPAddress, leaseIPAddressOf)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	s := New(b.Build())
	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s.Clock = clk
	return s, clk
}

// clusterNet is a ClusterNetwork on ClusterIPAddressPool pool ("" for none).
func clusterNet(name, pool string) *sdnv1.ClusterNetwork {
	n := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if pool != "" {
		n.Spec.IPAM = &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindClusterIPAddressPool, Name: pool}}
	}
	return n
}

// nsNet is a Network in ns on IPAddressPool pool ("" for none).
func nsNet(name, pool string) *sdnv1.Network {
	n := &sdnv1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if pool != "" {
		n.Spec.IPAM = &sdnv1.NetworkIPAM{IPAddressPoolRef: sdnv1.PoolRef{Kind: sdnv1.KindIPAddressPool, Name: pool}}
	}
	return n
}

// clusterPool is a ClusterIPAddressPool with the given subnets.
func clusterPool(name string, ttl time.Duration, subnets ...sdnv1.Subnet) *sdnv1.ClusterIPAddressPool {
	p := &sdnv1.ClusterIPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sdnv1.IPAddressPoolSpec{Pools: subnets}}
	if ttl > 0 {
		p.Spec.LeaseTTL = &metav1.Duration{Duration: ttl}
	}
	return p
}

// withRoutes gives a pools[] entry routes.
func withRoutes(sub sdnv1.Subnet, routes ...sdnv1.Route) sdnv1.Subnet {
	sub.Routes = routes
	return sub
}

// nsPool is an IPAddressPool in ns with the given subnets.
func nsPool(name string, subnets ...sdnv1.Subnet) *sdnv1.IPAddressPool {
	return &sdnv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: sdnv1.IPAddressPoolSpec{Pools: subnets}}
}

// subnetOf is a pools[] entry.
func subnetOf(cidr string, ranges ...string) sdnv1.Subnet {
	return sdnv1.Subnet{Network: cidr, Ranges: ranges}
}

// ipOpt changes an IPAddress under construction.
type ipOpt func(*sdnv1.IPAddress)

// inNamespace puts the IPAddress in namespace n.
func inNamespace(n string) ipOpt { return func(ip *sdnv1.IPAddress) { ip.Namespace = n } }

// static makes the IPAddress Static for address a.
func static(a string) ipOpt {
	return func(ip *sdnv1.IPAddress) {
		ip.Spec.Type = sdnv1.IPAddressTypeStatic
		ip.Spec.Static = &sdnv1.StaticIP{IP: a}
	}
}

// onNetwork puts the IPAddress on a Network of its namespace instead of a ClusterNetwork.
func onNetwork(ip *sdnv1.IPAddress) { ip.Spec.NetworkRef.Kind = sdnv1.KindNetwork }

// allocatedTo gives the IPAddress an Allocated status with address a.
func allocatedTo(a, cidr string) ipOpt {
	return func(ip *sdnv1.IPAddress) {
		ip.Status = sdnv1.IPAddressStatus{Address: a, Network: cidr, Phase: sdnv1.IPAddressPhaseAllocated}
	}
}

// ipAddr is an Auto IPAddress in ns on ClusterNetwork network.
func ipAddr(name, network string, opts ...ipOpt) *sdnv1.IPAddress {
	ip := &sdnv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: sdnv1.IPAddressSpec{
			Type:       sdnv1.IPAddressTypeAuto,
			NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: network},
		},
	}
	for _, o := range opts {
		o(ip)
	}
	return ip
}

// reconcileIP runs ReconcileIPAddress on ns/name and returns the IPAddress afterwards.
func reconcileIP(t *testing.T, s *Simulator, namespace, name string) (ctrl.Result, *sdnv1.IPAddress) {
	t.Helper()
	return reconcileWith(t, s, "ReconcileIPAddress", s.ReconcileIPAddress, namespace, name)
}

// reconcileAttach runs sdn-sim-attach's reconcile of IPAddress namespace/name and returns it as
// stored afterwards.
func reconcileAttach(t *testing.T, s *Simulator, namespace, name string) (ctrl.Result, *sdnv1.IPAddress) {
	t.Helper()
	return reconcileWith(t, s, "ReconcileAttachment", s.ReconcileAttachment, namespace, name)
}

// reconcileWith runs reconcile (named what) on IPAddress namespace/name and returns it as
// stored afterwards; an error of either fails t.
func reconcileWith(t *testing.T, s *Simulator, what string, reconcile func(context.Context, ctrl.Request) (ctrl.Result, error),
	namespace, name string) (ctrl.Result, *sdnv1.IPAddress) {
	t.Helper()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	res, err := reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("%s(%s): %v", what, key, err)
	}
	ip := &sdnv1.IPAddress{}
	if err := s.Client.Get(context.Background(), key, ip); err != nil {
		t.Fatalf("getting %s: %v", key, err)
	}
	return res, ip
}
