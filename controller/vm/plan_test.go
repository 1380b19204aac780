package vm

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// autoOf is vm's Auto IPAddress for ClusterNetwork network as vmipam creates it, allocated.
func autoOf(vm *vmv1.VirtualMachine, network, addr string) sdnv1.IPAddress {
	it := &iface{spec: vmv1.NetworksSpec{Type: "ClusterNetwork", Name: network}, key: "ClusterNetwork/" + network,
		autoName: naming.AutoIPAddress(vm.Name, "ClusterNetwork", network)}
	ip := autoIPAddress(vm, it)
	ip.UID, ip.ResourceVersion = types.UID("uid-"+ip.Name), "7"
	ip.Status.Address, ip.Status.Phase = addr, sdnv1.IPAddressPhaseAllocated
	ip.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionTrue}}
	return *ip
}

// entryFor is the networks-spec entry of ClusterNetwork network carrying ipName.
func entryFor(network, ipName string) sdnv1.NetworksSpecEntry {
	return sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: network, IfName: naming.IfName("ClusterNetwork", network),
		IPAssignmentMode: sdnv1.IPAssignmentModeDHCP, IPAddressNames: []string{ipName}}
}

// annotated returns a networks-spec annotation value of entries.
func annotated(t *testing.T, entries ...sdnv1.NetworksSpecEntry) map[string]string {
	t.Helper()
	w := networksSpecWrite(&corev1.Pod{}, entries)
	return map[string]string{sdnv1.AnnotationNetworksSpec: w.value}
}

// switchedScope: VM v ran on ClusterNetwork corp (Auto, allocated) and its spec now names corp2
// instead, whose Auto IPAddress was just created and waits for SDN. The running pod and the VM
// still carry corp's IPAddress.
func switchedScope(t *testing.T) *scope {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "vm-uid", Generation: 2}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "corp2"}}
	old := autoOf(vm, "corp", "10.0.0.5")
	fresh := autoOf(vm, "corp2", "")
	fresh.Status = sdnv1.IPAddressStatus{Phase: sdnv1.IPAddressPhasePending}
	now := time.Unix(1000, 0)
	fresh.CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
	vm.Annotations = annotated(t, entryFor("corp", old.Name))
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-v-1", Annotations: annotated(t, entryFor("corp", old.Name))}}
	it := &iface{index: 1, spec: vm.Spec.Networks[1], key: "ClusterNetwork/corp2", dupOf: -1, autoName: fresh.Name,
		network: &networkInfo{exists: true, ready: true, pool: &sdnv1.PoolRef{Name: "p"}}, auto: &fresh,
		decision: evaluator.Decision{Allocation: evaluator.AllocationAuto, Skip: true, Reason: evaluator.ReasonIPAddressPending, Hotplug: true},
		problem:  &problem{string(evaluator.ReasonIPAddressPending), "waiting for SDN"}}
	return &scope{vm: vm, interfaces: []*iface{it}, owned: []sdnv1.IPAddress{old, fresh}, pods: []corev1.Pod{pod},
		now: now, ipAddresses: map[string]*sdnv1.IPAddress{old.Name: &old, fresh.Name: &fresh}}
}

// TestADeferredPlanDeletesNothing: while the new Auto IPAddress waits for SDN, networks-spec
// writes wait too, so the old network's IPAddress — still on the VM and the running pod — must
// stay; once the writes happen, it goes.
func TestADeferredPlanDeletesNothing(t *testing.T) {
	s := switchedScope(t)
	p := plan(s)
	if !p.Deferred {
		t.Fatalf("plan not deferred: %+v", p.Interfaces)
	}
	if len(p.DeleteIPAddresses) != 0 {
		t.Errorf("a deferred plan deletes %v while the running pod still names it", p.DeleteIPAddresses)
	}
	s.now = s.now.Add(time.Minute) // past the grace: the pod drops corp, then corp's address goes
	p = plan(s)
	if p.Deferred || !p.Pods[0].Changed || !p.VMNetworksSpec.Changed {
		t.Fatalf("plan past the grace: deferred %v, pod write %+v", p.Deferred, p.Pods[0])
	}
	if got, want := p.DeleteIPAddresses, []string{s.owned[0].Name}; !slices.Equal(got, want) {
		t.Errorf("once the writes unplug it: delete %v, want %v", got, want)
	}
}

// TestOnlyIPAddressesVmipamCreatedAreDeleted: an Auto IPAddress controlled by the VM but
// without vmipam's interface annotation was made by someone else; vmipam never deletes it.
func TestOnlyIPAddressesVmipamCreatedAreDeleted(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.pods[0].Annotations, s.vm.Annotations = annotated(t), annotated(t)
	delete(s.owned[0].Annotations, AnnotationInterface)
	if got := plan(s).DeleteIPAddresses; len(got) != 0 {
		t.Errorf("deletes %v, which vmipam did not create", got)
	}
}

// TestATerminatingPodKeepsItsAddresses: a launcher pod being deleted may still run its guest;
// the IPAddresses it carries stay until it is gone.
func TestATerminatingPodKeepsItsAddresses(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.vm.Annotations = annotated(t)
	s.pods[0].DeletionTimestamp = &metav1.Time{Time: s.now}
	s.terminating, s.pods = s.pods, nil
	if got := plan(s).DeleteIPAddresses; len(got) != 0 {
		t.Errorf("deletes %v under a guest still shutting down", got)
	}
	s.terminating = nil // finished: observation drops it
	if got := plan(s).DeleteIPAddresses; len(got) != 1 {
		t.Errorf("after the pod finished: delete %v, want the old IPAddress", got)
	}
}

// TestNothingIsCreatedInATerminatingNamespace: the namespace controller deletes Auto
// IPAddresses before their VMs; creating them again would only be refused.
func TestNothingIsCreatedInATerminatingNamespace(t *testing.T) {
	s := switchedScope(t)
	s.interfaces[0].auto = nil
	s.namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	if got := plan(s).CreateIPAddresses; len(got) != 1 {
		t.Fatalf("live namespace: creates %d IPAddresses, want 1", len(got))
	}
	s.namespace.DeletionTimestamp = &metav1.Time{Time: s.now}
	if got := plan(s).CreateIPAddresses; len(got) != 0 {
		t.Errorf("terminating namespace: creates %v", got[0].Name)
	}
}

// TestPlanDoesNotChangeTheScope: plan is pure; the same scope gives the same plan twice and
// stays as it was observed.
func TestPlanDoesNotChangeTheScope(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.interfaces[0].decision.Hotplug = false
	before := *s.interfaces[0]
	first, second := plan(s), plan(s)
	for _, p := range []*Plan{first, second} { // SetStatusCondition stamps the time of the call
		for i := range p.Status.Conditions {
			p.Status.Conditions[i].LastTransitionTime = metav1.Time{}
		}
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("plan differs on the same scope:\n%+v\n%+v", first, second)
	}
	if !reflect.DeepEqual(*s.interfaces[0], before) || len(s.pending) != 0 {
		t.Errorf("plan changed the scope: %+v, pending %v", *s.interfaces[0], s.pending)
	}
}

// TestNetworksSpecIsComparedParsed: the virtualization controller writes the same annotation;
// an encoding with other key order and spacing is the same networks-spec and is not rewritten.
func TestNetworksSpecIsComparedParsed(t *testing.T) {
	e := entryFor("corp", "v-ip")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{sdnv1.AnnotationNetworksSpec: ` [ {"name":"corp", "type":"ClusterNetwork",
		"ipAddressNames":["v-ip"],"ipAssignmentMode":"DHCP","ifName":"` + e.IfName + `"} ]`}}}
	if w := networksSpecWrite(pod, []sdnv1.NetworksSpecEntry{e}); w.Changed {
		t.Errorf("an equal networks-spec in another encoding is rewritten")
	}
	pod.Annotations[sdnv1.AnnotationNetworksSpec] = "not json"
	if w := networksSpecWrite(pod, []sdnv1.NetworksSpecEntry{e}); !w.Changed {
		t.Errorf("an unreadable networks-spec is left as it is")
	}
}

// TestRetryBackoffGrowsOnlyWhenTheRetryIsDue: a VM waiting for a pool is retried at 2 s, 4 s,
// 8 s, …; reconciles that events bring in between keep the schedule instead of growing it.
func TestRetryBackoffGrowsOnlyWhenTheRetryIsDue(t *testing.T) {
	r := &Reconciler{} // without SetupWithManager: must not panic
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "v"}}
	b, now := r.retries(), time.Unix(0, 0)
	if d := b.next(req, now); d != exhaustionBaseDelay {
		t.Fatalf("first retry after %v, want %v", d, exhaustionBaseDelay)
	}
	for range 5 { // events before the retry is due
		now = now.Add(100 * time.Millisecond)
		if d := b.next(req, now); d > exhaustionBaseDelay {
			t.Fatalf("an event-driven reconcile grew the backoff to %v", d)
		}
	}
	now = now.Add(exhaustionBaseDelay)
	if d := b.next(req, now); d != 2*exhaustionBaseDelay {
		t.Errorf("second retry after %v, want %v", d, 2*exhaustionBaseDelay)
	}
	b.forget(req)
	if d := b.next(req, now); d != exhaustionBaseDelay {
		t.Errorf("after forget: %v, want %v", d, exhaustionBaseDelay)
	}
	s := &scope{interfaces: []*iface{{problem: &problem{reason: string(evaluator.ReasonPoolExhausted)}}}}
	if res := (&Reconciler{}).retry(req, s); res.RequeueAfter != exhaustionBaseDelay {
		t.Errorf("retry without SetupWithManager = %+v", res)
	}
}
