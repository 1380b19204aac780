package plan

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// TestADeferredPlanWritesAndReleasesNothing: while the new Auto IPAddress waits for SDN, the
// record waits too, so the old network's IPAddress — which the record and the running pod still
// attach — stays; past the grace the record is written without it and its release starts.
func TestADeferredPlanWritesAndReleasesNothing(t *testing.T) {
	s := switchedScope(t)
	p := plan(s)
	if !p.Deferred || p.RecordChanged || p.Record != s.record {
		t.Fatalf("plan: deferred %v, record changed %v; want deferred with the record as it is", p.Deferred, p.RecordChanged)
	}
	if len(p.Releasing)+len(p.Releases) != 0 {
		t.Errorf("a deferred plan releases %v while the running pod still names it", p.Releasing)
	}
	s.now = s.now.Add(time.Minute) // past the grace: the record drops corp and corp's release starts
	p = plan(s)
	if p.Deferred || !p.RecordChanged {
		t.Fatalf("plan past the grace: deferred %v, record changed %v", p.Deferred, p.RecordChanged)
	}
	old := s.owned[0]
	want := v1alpha1.Release{Type: v1alpha1.ReleaseAuto, IPAddressName: old.Name, UID: old.UID, Since: metav1.NewMicroTime(s.now)}
	if !slices.Equal(p.Record.Spec.Releases, []v1alpha1.Release{want}) || !slices.Equal(p.Releasing, []string{old.Name}) {
		t.Errorf("releases %+v (releasing %v), want corp's IPAddress released from now", p.Record.Spec.Releases, p.Releasing)
	}
	if len(p.Releases) != 0 || p.ReleaseAfter != ReleaseGrace {
		t.Errorf("due %v, next after %v; want nothing due before ReleaseGrace", p.Releases, p.ReleaseAfter)
	}
}

// TestAReleaseIsDueReleaseGraceAfterTheRecordLetItGoAndOnceNothingCarriesIt: the release is
// timed from the record write, and even then waits for the pods to let the address go.
func TestAReleaseIsDueReleaseGraceAfterTheRecordLetItGoAndOnceNothingCarriesIt(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	written := plan(s).Record
	s.record, s.now = written, s.now.Add(ReleaseGrace)
	if p := plan(s); p.RecordChanged || len(p.Releases) != 0 {
		t.Errorf("the running pod still carries it: due %v (record changed %v), want none", p.Releases, p.RecordChanged)
	}
	s.pods[0].Annotations = carrying(t) // the consumer unplugged it
	p := plan(s)
	if len(p.Releases) != 1 || p.Releases[0].Name != s.owned[0].Name || p.RecordChanged {
		t.Errorf("due %v (record changed %v), want corp's IPAddress, the record left alone", p.Releases, p.RecordChanged)
	}
	s.now = s.now.Add(-time.Second) // a second short of the grace
	if p := plan(s); len(p.Releases) != 0 || p.ReleaseAfter != time.Second {
		t.Errorf("before the grace: due %v, next after %v; want none, in 1s", p.Releases, p.ReleaseAfter)
	}
}

// TestFinishedBookkeepingIsNotWrittenAlone: once a released IPAddress is gone, its release entry
// is dropped with the next write, not by a write of its own.
func TestFinishedBookkeepingIsNotWrittenAlone(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.record = plan(s).Record
	s.owned = s.owned[1:] // deleted
	if p := plan(s); p.RecordChanged || len(p.Releasing) != 0 {
		t.Errorf("record changed %v (releasing %v), want no write for a release that is over", p.RecordChanged, p.Releasing)
	}
	s.interfaces[0].decision.Hotplug = false // any real change writes, and drops it
	p := plan(s)
	if !p.RecordChanged || len(p.Record.Spec.Releases) != 0 {
		t.Errorf("record changed %v with releases %+v, want written without the finished release", p.RecordChanged, p.Record.Spec.Releases)
	}
}

// TestOnlyIPAddressesVmipamCreatedAreReleased: an Auto IPAddress controlled by the VM but
// without vmipam's interface annotation was made by someone else; vmipam never deletes it.
func TestOnlyIPAddressesVmipamCreatedAreReleased(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.pods[0].Annotations = carrying(t)
	delete(s.owned[0].Annotations, AnnotationInterface)
	if p := plan(s); len(p.Record.Spec.Releases) != 0 || len(p.Releasing) != 0 {
		t.Errorf("releases %v, which vmipam did not create", p.Record.Spec.Releases)
	}
}

// TestATerminatingPodKeepsItsAddresses: a launcher pod being deleted may still run its guest;
// the IPAddresses it carries are not deleted until it is gone.
func TestATerminatingPodKeepsItsAddresses(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.record = plan(s).Record
	s.now = s.now.Add(ReleaseGrace)
	s.pods[0].DeletionTimestamp = &metav1.Time{Time: s.now}
	s.terminating, s.pods, s.removed = s.pods, nil, nil
	if got := plan(s).Releases; len(got) != 0 {
		t.Errorf("deletes %v under a guest still shutting down", got)
	}
	s.terminating = nil // finished: observation drops it
	if got := plan(s).Releases; len(got) != 1 {
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
	before, record := *s.interfaces[0], s.record.DeepCopy()
	first, second := plan(s), plan(s)
	if !reflect.DeepEqual(first, second) {
		t.Errorf("plan differs on the same scope:\n%+v\n%+v", first, second)
	}
	if !reflect.DeepEqual(*s.interfaces[0], before) || !reflect.DeepEqual(s.record, record) {
		t.Errorf("plan changed the scope: %+v", *s.interfaces[0])
	}
}

// TestATransientProblemKeepsWhatIsApplied: an interface whose network flaps or whose policy
// evaluation fails stays attached with what it carries, reporting the problem; a refusal
// unplugs it.
func TestATransientProblemKeepsWhatIsApplied(t *testing.T) {
	for reason, kept := range map[evaluator.Reason]bool{evaluator.ReasonNetworkNotReady: true, evaluator.ReasonPolicyError: true,
		evaluator.ReasonIPAddressNotFound: false} {
		s := switchedScope(t)
		it := s.interfaces[0]
		it.spec.Name, it.key, it.autoName, it.auto = "corp", "ClusterNetwork/corp", s.owned[0].Name, &s.owned[0]
		s.vm.Spec.Networks[1].Name, s.removed = "corp", nil
		it.decision = evaluator.Decision{Allocation: evaluator.AllocationAuto, Skip: true, Reason: reason, Hotplug: true}
		it.problem = &problem{string(reason), "something"}
		d := plan(s).Record.Spec.Interfaces[0]
		if d.Attach != kept || d.Reason != string(reason) || kept && (d.IPAddressName != s.owned[0].Name || d.Address != "10.0.0.5") {
			t.Errorf("%s: decision %+v, want attached %v with what runs and the problem reported", reason, d, kept)
		}
	}
}

// TestAStoppedVMsAppliedStateIsItsRecord: with no pod, what the record last decided is what is
// applied — the change input compares against it.
func TestAStoppedVMsAppliedStateIsItsRecord(t *testing.T) {
	s := switchedScope(t)
	s.pods, s.removed = nil, nil
	got := appliedList(s)
	if len(got) != 1 || got[0].Name != "corp" || !slices.Equal(got[0].IPAddressNames, []string{s.owned[0].Name}) {
		t.Errorf("applied = %+v, want the record's corp", got)
	}
	s.record.Spec.VMUID = "an-earlier-vm"
	if got := appliedList(s); got != nil {
		t.Errorf("applied = %+v from an earlier VM's record, want none", got)
	}
}

// TestTheRecordIsWrittenOnlyWhenItChanged: the same decisions write nothing, whatever the
// record's status says; an ownership taken over from an earlier VM of the same name writes.
func TestTheRecordIsWrittenOnlyWhenItChanged(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	s.record = plan(s).Record
	s.record.Status.ObservedGeneration = 7
	if p := plan(s); p.RecordChanged {
		t.Errorf("an unchanged decision writes the record: %+v", p.Record.Spec)
	}
	s.record.OwnerReferences[0].UID = "an-earlier-vm"
	p := plan(s)
	if !p.RecordChanged || p.Record.OwnerReferences[0].UID != s.vm.UID {
		t.Errorf("record owned by an earlier VM: changed %v owner %v, want taken over", p.RecordChanged, p.Record.OwnerReferences)
	}
}

// TestARemovedInterfaceIsHeldByTheRecordOnlyWhenHotplugSaysNo: a removal hotplug allows is left
// out of the record (which unplugs it); one it forbids stays, attached as it runs, marked
// removed.
func TestARemovedInterfaceIsHeldByTheRecordOnlyWhenHotplugSaysNo(t *testing.T) {
	s := switchedScope(t)
	s.now = s.now.Add(time.Minute)
	if ds := plan(s).Record.Spec.Interfaces; len(ds) != 1 {
		t.Errorf("decisions %+v, want the removal (hotplug allowed) left out", ds)
	}
	s.removed[0].decision.Hotplug = false
	ds := plan(s).Record.Spec.Interfaces
	if len(ds) != 2 || !ds[1].Removed || !ds[1].Attach || ds[1].IPAddressName != s.owned[0].Name || ds[1].Address != "10.0.0.5" {
		t.Errorf("decisions %+v, want corp held, attached with its address, until the restart", ds)
	}
}

// TestAnUnansweredAutoIPAddressWaitsWhileSDNAnswersOthers: a new VM's Auto IPAddress SDN has
// not answered is reported pending UnansweredGrace after its creation when SDN is quiet on its
// network, but waits while SDN keeps answering others there (a backlog), until SDN has been
// quiet for UnansweredGrace or BacklogGrace has passed. A VM with a record keeps
// UnansweredGrace: its other changes must not wait for the backlog.
func TestAnUnansweredAutoIPAddressWaitsWhileSDNAnswersOthers(t *testing.T) {
	fresh := func(s *scope) *sdnv1.IPAddress { return s.interfaces[0].auto }
	newVM := func(t *testing.T) *scope { // no record, no pod yet: only corp2, just created
		s := switchedScope(t)
		s.record, s.pods, s.removed, s.owned = nil, nil, nil, []sdnv1.IPAddress{*fresh(s)}
		fresh(s).Status = sdnv1.IPAddressStatus{} // SDN has written nothing on it
		return s
	}
	age := UnansweredGrace + 10*time.Second
	for _, c := range []struct {
		name          string
		record        bool
		created, last time.Duration // before t0; last < 0: SDNLastAnswer not set
		deferred      bool
		retry         time.Duration
	}{
		{"SDN never seen answering", false, age, -1, false, 0},
		{"SDN quiet since before the creation", false, age, age + time.Second, false, 0},
		{"SDN answered others a second ago", false, age, time.Second, true, BacklogGrace - age},
		{"SDN answered others, then fell quiet", false, age, UnansweredGrace, false, 0},
		{"past BacklogGrace", false, BacklogGrace, time.Second, false, 0},
		{"within UnansweredGrace, SDN quiet", false, 10 * time.Second, -1, true, UnansweredGrace - 10*time.Second},
		{"a VM with a record: SDN answering others is no reason to hold it back", true, age, time.Second, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newVM(t)
			if c.record {
				s = switchedScope(t)
				fresh(s).Status = sdnv1.IPAddressStatus{}
			}
			fresh(s).CreationTimestamp = metav1.NewTime(t0.Add(-c.created))
			if c.last >= 0 {
				s.sdnLastAnswer = func(*sdnv1.IPAddress) time.Time { return t0.Add(-c.last) }
			}
			p := plan(s)
			if p.Deferred != c.deferred || (c.deferred && p.RetryAfter != c.retry) {
				t.Errorf("deferred %v, retry after %v; want deferred %v, retry after %v", p.Deferred, p.RetryAfter, c.deferred, c.retry)
			}
			if !c.deferred && !p.RecordChanged {
				t.Errorf("not deferred, but the record is not written: the skip is not reported")
			}
		})
	}
}

// TestAnAutoIPAddressJustCreatedIsLookedAtWhenItsGraceCanEnd: the plan that creates an Auto
// IPAddress defers the record and looks again when the address's wait could end —
// UnansweredGrace, or BacklogGrace while SDN is answering others on the network for a new VM —
// not FreshPendingGrace later, when an address SDN has still not answered always waits on
// (before round 15 that reconcile came for every VM of a backlog and changed nothing).
func TestAnAutoIPAddressJustCreatedIsLookedAtWhenItsGraceCanEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		record bool
		last   time.Duration // before t0; < 0: SDNLastAnswer not set
		retry  time.Duration
	}{
		{"SDN never seen answering", false, -1, UnansweredGrace},
		{"SDN quiet for UnansweredGrace", false, UnansweredGrace, UnansweredGrace},
		{"SDN answered others a second ago", false, time.Second, BacklogGrace},
		{"a VM with a record keeps UnansweredGrace", true, time.Second, UnansweredGrace},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := switchedScope(t)
			if !c.record {
				s.record, s.pods, s.removed, s.owned = nil, nil, nil, nil
			}
			delete(s.ipAddresses, s.interfaces[0].autoName)
			s.interfaces[0].auto = nil
			if c.last >= 0 {
				s.sdnLastAnswer = func(*sdnv1.IPAddress) time.Time { return t0.Add(-c.last) }
			}
			p := plan(s)
			if len(p.CreateIPAddresses) != 1 || !p.Deferred || p.RetryAfter != c.retry {
				t.Errorf("creates %d, deferred %v, retry after %v; want 1 created, deferred, retry after %v",
					len(p.CreateIPAddresses), p.Deferred, p.RetryAfter, c.retry)
			}
		})
	}
}

// TestADeferredVMIsLookedAtAgainWhenItsFirstGraceEnds: of several interfaces waiting for SDN,
// the one whose grace ends first decides when the VM is reconciled again — then its problem
// is reported — not a backlogged one waiting up to BacklogGrace.
func TestADeferredVMIsLookedAtAgainWhenItsFirstGraceEnds(t *testing.T) {
	s := switchedScope(t)
	s.record, s.pods, s.removed = nil, nil, nil
	corp2 := s.interfaces[0].auto
	corp2.Status = sdnv1.IPAddressStatus{} // unanswered, SDN busy with others: backlogged
	corp2.CreationTimestamp = metav1.NewTime(t0.Add(-10 * time.Second))
	s.sdnLastAnswer = func(*sdnv1.IPAddress) time.Time { return t0.Add(-time.Second) }
	s.vm.Spec.Networks = append(s.vm.Spec.Networks, vmv1.NetworksSpec{Type: "ClusterNetwork", Name: "corp3"})
	corp3 := autoOf(s.vm, "corp3", "")
	corp3.Status = sdnv1.IPAddressStatus{Phase: sdnv1.IPAddressPhasePending} // answered, not allocated yet
	corp3.CreationTimestamp = metav1.NewTime(t0.Add(-time.Second))
	s.interfaces = append(s.interfaces, &iface{index: 2, spec: s.vm.Spec.Networks[2], key: "ClusterNetwork/corp3", dupOf: -1,
		autoName: corp3.Name, network: pooled(), auto: &corp3,
		decision: evaluator.Decision{Allocation: evaluator.AllocationAuto, Skip: true, Reason: evaluator.ReasonIPAddressPending, Hotplug: true},
		problem:  &problem{string(evaluator.ReasonIPAddressPending), "waiting for SDN"}})
	s.owned = []sdnv1.IPAddress{*corp2, corp3}
	s.ipAddresses[corp3.Name] = &corp3
	p := plan(s)
	if want := FreshPendingGrace - time.Second; !p.Deferred || p.RetryAfter != want {
		t.Errorf("deferred %v, retry after %v; want deferred, retry after %v (corp3's grace)", p.Deferred, p.RetryAfter, want)
	}
}

// TestANetworkSDNHasNotAnsweredYetIsWaitedForAsAFreshAllocationIs: a VM created with its network
// (an admin's or a GitOps sync's one apply) finds the network not Ready because SDN has not
// looked at it yet; its record waits FreshPendingGrace from the network's creation instead of
// reporting a skip that SDN's Ready makes stale a moment later (and writing the record twice).
// A network SDN reports not Ready, or one older than the grace, is reported at once.
func TestANetworkSDNHasNotAnsweredYetIsWaitedForAsAFreshAllocationIs(t *testing.T) {
	for _, c := range []struct {
		name     string
		age      time.Duration
		answered bool
		deferred bool
	}{
		{"unanswered, 2s old", 2 * time.Second, false, true},
		{"unanswered, past the grace", FreshPendingGrace + time.Second, false, false},
		{"SDN says not Ready", 2 * time.Second, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := switchedScope(t)
			s.record, s.pods, s.removed = nil, nil, nil
			it := s.interfaces[0]
			it.network = pooled()
			it.network.ready, it.network.answered, it.network.created = false, c.answered, t0.Add(-c.age)
			it.decision.Reason = evaluator.ReasonNetworkNotReady
			it.problem = &problem{string(evaluator.ReasonNetworkNotReady), "ClusterNetwork corp2 is not Ready"}
			p := plan(s)
			if p.Deferred != c.deferred || p.RecordChanged == c.deferred {
				t.Fatalf("deferred %v, record written %v; want deferred %v", p.Deferred, p.RecordChanged, c.deferred)
			}
			if want := FreshPendingGrace - c.age; c.deferred && p.RetryAfter != want {
				t.Errorf("retry after %v, want %v: when the network's grace ends", p.RetryAfter, want)
			}
		})
	}
}
