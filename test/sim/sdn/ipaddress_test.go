package sdn

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// want is the expected status of one IPAddress after a reconcile.
type want struct {
	address, network string
	phase            sdnv1.IPAddressPhase
	status           metav1.ConditionStatus
	reason           string
}

func (w want) check(t *testing.T, ip *sdnv1.IPAddress) {
	t.Helper()
	st := ip.Status
	if st.Address != w.address || st.Network != w.network || st.Phase != w.phase {
		t.Errorf("%s: status = %s %s %s, want %s %s %s", ip.Name, st.Address, st.Network, st.Phase, w.address, w.network, w.phase)
	}
	c := meta.FindStatusCondition(st.Conditions, sdnv1.ConditionAllocated)
	if c == nil || c.Status != w.status || c.Reason != w.reason {
		t.Errorf("%s: Allocated condition = %+v, want %s/%s", ip.Name, c, w.status, w.reason)
	}
}

func ok(address, network string) want {
	return want{address: address, network: network, phase: sdnv1.IPAddressPhaseAllocated, status: metav1.ConditionTrue, reason: sdnv1.ReasonIPAddressAllocated}
}

func pending(reason string) want {
	return want{phase: sdnv1.IPAddressPhasePending, status: metav1.ConditionFalse, reason: reason}
}

func TestReconcileIPAddress(t *testing.T) {
	corp := clusterNet("corp", "corp-pool")
	tests := []struct {
		name    string
		objs    []client.Object
		order   []string // IPAddresses reconciled in this order
		want    map[string]want
		requeue time.Duration // of the last reconcile
	}{
		{
			name: "auto allocates ranges in order, then the next subnet",
			objs: []client.Object{corp,
				clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.11"), subnetOf("10.0.1.0/24", "10.0.1.5-10.0.1.5")),
				ipAddr("a", "corp"), ipAddr("b", "corp"), ipAddr("c", "corp")},
			order: []string{"a", "b", "c"},
			want:  map[string]want{"a": ok("10.0.0.10", "10.0.0.0/24"), "b": ok("10.0.0.11", "10.0.0.0/24"), "c": ok("10.0.1.5", "10.0.1.0/24")},
		},
		{
			name: "without ranges only the network and broadcast addresses are skipped",
			objs: []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/30")),
				ipAddr("a", "corp"), ipAddr("b", "corp"), ipAddr("c", "corp")},
			order:   []string{"a", "b", "c"},
			want:    map[string]want{"a": ok("10.0.0.1", "10.0.0.0/30"), "b": ok("10.0.0.2", "10.0.0.0/30"), "c": pending(sdnv1.ReasonNoFreeIPAddress)},
			requeue: DefaultRetryInterval,
		},
		{
			name:  "without ranges the first address is the first host: no gateway is withheld",
			objs:  []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24")), ipAddr("a", "corp")},
			order: []string{"a"},
			want:  map[string]want{"a": ok("10.0.0.1", "10.0.0.0/24")},
		},
		{
			name: "a /31 hands out both of its addresses (RFC 3021)",
			objs: []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.4/31")),
				ipAddr("a", "corp"), ipAddr("b", "corp"), ipAddr("c", "corp")},
			order:   []string{"a", "b", "c"},
			want:    map[string]want{"a": ok("10.0.0.4", "10.0.0.4/31"), "b": ok("10.0.0.5", "10.0.0.4/31"), "c": pending(sdnv1.ReasonNoFreeIPAddress)},
			requeue: DefaultRetryInterval,
		},
		{
			name:    "a /32 hands out its one address",
			objs:    []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.9/32")), ipAddr("a", "corp"), ipAddr("s", "corp", static("10.0.0.9"))},
			order:   []string{"s", "a"},
			want:    map[string]want{"s": ok("10.0.0.9", "10.0.0.9/32"), "a": pending(sdnv1.ReasonNoFreeIPAddress)},
			requeue: DefaultRetryInterval,
		},
		{
			name:    "exhausted pool leaves the IPAddress Pending with NoFreeIPAddress and retries",
			objs:    []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.10")), ipAddr("a", "corp"), ipAddr("b", "corp")},
			order:   []string{"a", "b"},
			want:    map[string]want{"a": ok("10.0.0.10", "10.0.0.0/24"), "b": pending(sdnv1.ReasonNoFreeIPAddress)},
			requeue: DefaultRetryInterval,
		},
		{
			name:  "addresses are unique across namespaces on a ClusterNetwork",
			objs:  []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.11")), ipAddr("a", "corp"), ipAddr("a", "corp", inNamespace("other"))},
			order: []string{"default/a", "other/a"},
			want:  map[string]want{"default/a": ok("10.0.0.10", "10.0.0.0/24"), "other/a": ok("10.0.0.11", "10.0.0.0/24")},
		},
		{
			name:  "static in range and free is allocated",
			objs:  []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.20")), ipAddr("s", "corp", static("10.0.0.15"))},
			order: []string{"s"},
			want:  map[string]want{"s": ok("10.0.0.15", "10.0.0.0/24")},
		},
		{
			name:    "static out of range is refused with the stand-in's own reason",
			objs:    []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.20")), ipAddr("s", "corp", static("10.0.0.21"))},
			order:   []string{"s"},
			want:    map[string]want{"s": pending(ReasonIPOutOfRange)},
			requeue: DefaultRetryInterval,
		},
		{
			name:    "static address held by another IPAddress is refused with the stand-in's own reason",
			objs:    []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.20")), ipAddr("a", "corp"), ipAddr("s", "corp", static("10.0.0.10"))},
			order:   []string{"a", "s"},
			want:    map[string]want{"a": ok("10.0.0.10", "10.0.0.0/24"), "s": pending(ReasonIPInUse)},
			requeue: DefaultRetryInterval,
		},
		{
			name:    "static without an address is refused with the stand-in's own reason",
			objs:    []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24")), ipAddr("s", "corp", static("not-an-ip"))},
			order:   []string{"s"},
			want:    map[string]want{"s": pending(ReasonInvalidIPAddress)},
			requeue: DefaultRetryInterval,
		},
		{
			name: "an Allocated IPAddress keeps its address on re-reconcile",
			objs: []client.Object{corp, clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.20")),
				ipAddr("a", "corp", allocatedTo("10.0.0.20", "10.0.0.0/24")), ipAddr("b", "corp")},
			order: []string{"a", "b", "a"},
			want:  map[string]want{"b": ok("10.0.0.10", "10.0.0.0/24")},
		},
		{
			name:    "missing network leaves the IPAddress Pending with the stand-in's own reason",
			objs:    []client.Object{ipAddr("a", "nowhere")},
			order:   []string{"a"},
			want:    map[string]want{"a": pending(ReasonNetworkNotFound)},
			requeue: DefaultRetryInterval,
		},
		{
			name:    "network without pool leaves the IPAddress Pending with the stand-in's own reason",
			objs:    []client.Object{clusterNet("l2", ""), ipAddr("a", "l2")},
			order:   []string{"a"},
			want:    map[string]want{"a": pending(ReasonNoIPAMPool)},
			requeue: DefaultRetryInterval,
		},
		{
			name:    "missing pool leaves the IPAddress Pending with the stand-in's own reason",
			objs:    []client.Object{corp, ipAddr("a", "corp")},
			order:   []string{"a"},
			want:    map[string]want{"a": pending(ReasonNoIPAMPool)},
			requeue: DefaultRetryInterval,
		},
		{
			name:  "a namespaced Network allocates from the IPAddressPool of its namespace",
			objs:  []client.Object{nsNet("lan", "lan-pool"), nsPool("lan-pool", subnetOf("192.168.0.0/24", "192.168.0.100-192.168.0.100")), ipAddr("a", "lan", onNetwork)},
			order: []string{"a"},
			want:  map[string]want{"a": ok("192.168.0.100", "192.168.0.0/24")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newSim(t, nil, tt.objs...)
			var res ctrl.Result
			got := map[string]*sdnv1.IPAddress{}
			for _, key := range tt.order {
				namespace, name := splitKey(key)
				res, got[key] = reconcileIP(t, s, namespace, name)
			}
			for key, w := range tt.want {
				w.check(t, got[key])
			}
			if res.RequeueAfter != tt.requeue {
				t.Errorf("last RequeueAfter = %v, want %v", res.RequeueAfter, tt.requeue)
			}
		})
	}
}

func TestReconcileIPAddressKeepsAllocationStable(t *testing.T) {
	s, _ := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.20")),
		ipAddr("a", "corp", allocatedTo("10.0.0.20", "10.0.0.0/24")))
	before := &sdnv1.IPAddress{}
	if err := s.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "a"}, before); err != nil {
		t.Fatal(err)
	}
	_, after := reconcileIP(t, s, ns, "a")
	if after.Status.Address != "10.0.0.20" || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("re-reconcile changed the IPAddress: address %s, resourceVersion %s -> %s",
			after.Status.Address, before.ResourceVersion, after.ResourceVersion)
	}
}

// TestReconcileIPAddressStaleCache pins down that a cache which has not seen the simulator's
// own status writes yet cannot make it hand out an address twice.
func TestReconcileIPAddressStaleCache(t *testing.T) {
	staleList := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if l, ok := list.(*sdnv1.IPAddressList); ok {
			for i := range l.Items {
				l.Items[i].Status = sdnv1.IPAddressStatus{} // as if no status write had arrived
			}
		}
		return nil
	}}
	s, _ := newSim(t, &staleList, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.11")), ipAddr("a", "corp"), ipAddr("b", "corp"))
	_, a := reconcileIP(t, s, ns, "a")
	_, b := reconcileIP(t, s, ns, "b")
	ok("10.0.0.10", "10.0.0.0/24").check(t, a)
	ok("10.0.0.11", "10.0.0.0/24").check(t, b)
}

func TestReconcileIPAddressConflictRequeuesWithoutHolding(t *testing.T) {
	conflict := interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
		return apierrors.NewConflict(schema.GroupResource{Group: "network.deckhouse.io", Resource: "ipaddresses"}, "a", nil)
	}}
	s, _ := newSim(t, &conflict, clusterNet("corp", "corp-pool"), clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24")), ipAddr("a", "corp"))
	res, _ := reconcileIP(t, s, ns, "a")
	if res.RequeueAfter != conflictRetry {
		t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, conflictRetry)
	}
	if len(s.ledger.holdings) != 0 {
		t.Errorf("ledger holds %v after a lost write, want nothing", s.ledger.holdings)
	}
}

func TestAllocationCarriesTheRoutesOfItsSubnet(t *testing.T) {
	route := sdnv1.Route{Destination: "10.20.0.0/16", Via: "10.0.1.1"}
	s, _ := newSim(t, nil, clusterNet("corp", "corp-pool"),
		clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24", "10.0.0.10-10.0.0.10"), withRoutes(subnetOf("10.0.1.0/24", "10.0.1.10-10.0.1.10"), route)),
		ipAddr("a", "corp"), ipAddr("b", "corp"))
	_, a := reconcileIP(t, s, ns, "a")
	_, b := reconcileIP(t, s, ns, "b")
	if len(a.Status.Routes) != 0 || len(b.Status.Routes) != 1 || b.Status.Routes[0] != route {
		t.Errorf("routes = %v (first subnet, none) and %v (second subnet), want none and [%v]", a.Status.Routes, b.Status.Routes, route)
	}
}

func TestPendingOfPool(t *testing.T) {
	s, _ := newSim(t, nil, clusterNet("corp", "corp-pool"), clusterNet("lab", "lab-pool"),
		clusterPool("corp-pool", 0, subnetOf("10.0.0.0/24")), clusterPool("lab-pool", 0, subnetOf("10.1.0.0/24")),
		ipAddr("waiting", "corp"), ipAddr("waiting-elsewhere", "lab"), ipAddr("done", "corp", allocatedTo("10.0.0.1", "10.0.0.0/24")))
	got := s.pendingOfPool(context.Background(), poolKey{Kind: sdnv1.KindClusterIPAddressPool, Name: "corp-pool"}, true)
	if len(got) != 1 || got[0].Name != "waiting" {
		t.Errorf("pendingOfPool() = %v, want only default/waiting", got)
	}
}

func create(t *testing.T, s *Simulator, obj client.Object) {
	t.Helper()
	if err := s.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// deleteIP deletes ns/name and reconciles the deletion.
func deleteIP(t *testing.T, s *Simulator, name string) {
	t.Helper()
	ip := &sdnv1.IPAddress{}
	ip.Namespace, ip.Name = ns, name
	if err := s.Client.Delete(context.Background(), ip); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if _, err := s.ReconcileIPAddress(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
}

// splitKey splits "ns/name"; a bare name is in ns.
func splitKey(key string) (string, string) {
	for i := range key {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return ns, key
}
