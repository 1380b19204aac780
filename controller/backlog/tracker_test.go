package backlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// ipAddress is an IPAddress of ClusterNetwork corp, answered or not.
func ipAddress(name string, answered bool) *sdnv1.IPAddress {
	return onNetwork("corp", name, answered)
}

// onNetwork is an IPAddress of ClusterNetwork net, answered or not.
func onNetwork(net, name string, answered bool) *sdnv1.IPAddress {
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto, NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: net}}}
	if answered {
		ip.Status.Phase = sdnv1.IPAddressPhaseAllocated
	}
	return ip
}

// noticeAfter steps clk by d, lets tr check, and reports whether a stall notice is waiting.
func noticeAfter(tr *Tracker, clk *clocktesting.FakeClock, d time.Duration) bool {
	clk.Step(d)
	tr.check()
	return stalled(tr)
}

// synced returns a Tracker whose informer has synced, at clk's time.
func synced(clk *clocktesting.FakeClock) *Tracker {
	tr := New(30*time.Second, clk)
	tr.synced = func() bool { return true }
	tr.mu.Lock()
	tr.syncedLocked() // as Start's first tick does
	tr.mu.Unlock()
	return tr
}

// stalled reports whether a stall notice is waiting.
func stalled(tr *Tracker) bool {
	select {
	case e := <-tr.Stalls():
		return e.Object != nil
	default:
		return false
	}
}

// TestTheLastAnswerIsTheLatestFirstStatusSDNWrote: only SDN's first write on an IPAddress is an
// answer; later writes, creations and deletions are not.
func TestTheLastAnswerIsTheLatestFirstStatusSDNWrote(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	h := tr.handler()
	if got := tr.LastAnswer(ipAddress("a", false)); !got.Equal(clk.Now()) {
		t.Fatalf("before any answer: %v, want when the informer was found synced, %v", got, clk.Now())
	}
	h.OnAdd(ipAddress("a", false), true)
	h.OnAdd(ipAddress("b", true), true)
	clk.Step(5 * time.Second)
	h.OnUpdate(ipAddress("b", true), ipAddress("b", true)) // an attachment: not an answer
	if got := tr.LastAnswer(ipAddress("a", false)); !got.Equal(time.Unix(1000, 0)) {
		t.Errorf("after a later write: %v, want no answer noted", got)
	}
	h.OnUpdate(ipAddress("a", false), ipAddress("a", true))
	if got := tr.LastAnswer(ipAddress("c", false)); !got.Equal(clk.Now()) {
		t.Errorf("after a's first status: %v, want %v", got, clk.Now())
	}
	if got := tr.LastAnswer(onNetwork("lab", "d", false)); !got.Equal(time.Unix(1000, 0)) {
		t.Errorf("on another network: %v, want no answer noted there", got)
	}
}

// TestNothingIsKnownBeforeTheInformerSynced: a process that has just started — a new leader
// whose initial list of a large cluster takes long — has seen no update yet, so it neither
// declares a stall nor dates SDN's last answer before it could have seen one.
func TestNothingIsKnownBeforeTheInformerSynced(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := New(30*time.Second, clk)
	listed := false
	tr.synced = func() bool { return listed }
	h := tr.handler()
	clk.Step(40 * time.Second) // leader election and the initial list
	for _, name := range []string{"a", "b", "c"} {
		h.OnAdd(ipAddress(name, false), true)
	}
	tr.check()
	if stalled(tr) {
		t.Fatal("a stall notice before the informer synced")
	}
	if got := tr.LastAnswer(ipAddress("a", false)); !got.Equal(clk.Now()) {
		t.Errorf("last answer before the sync: %v, want now (nothing known)", got)
	}
	listed = true
	tr.check()
	if stalled(tr) {
		t.Fatal("a stall notice right after the sync")
	}
	synced := clk.Now()
	clk.Step(29 * time.Second)
	if got := tr.LastAnswer(ipAddress("a", false)); !got.Equal(synced) {
		t.Errorf("last answer after the sync: %v, want the sync %v", got, synced)
	}
	tr.check()
	if stalled(tr) {
		t.Fatal("a stall notice 29 s after the sync")
	}
	if !noticeAfter(tr, clk, time.Second) {
		t.Fatal("no stall notice 30 s after the sync with three IPAddresses unanswered")
	}
}

// TestAStallNoticeComesOncePerQuietSpellWhileIPAddressesWait: SDN quiet for the quiet time with
// an IPAddress unanswered sends one notice; an answer re-arms it; nothing unanswered, no notice;
// the quiet counts from when the first address began to wait, not from an idle network's last
// answer.
func TestAStallNoticeComesOncePerQuietSpellWhileIPAddressesWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	h := tr.handler()
	if noticeAfter(tr, clk, time.Minute) {
		t.Fatal("a notice with nothing unanswered")
	}
	h.OnAdd(ipAddress("a", false), false)
	h.OnAdd(ipAddress("b", false), false)
	tr.check()
	if stalled(tr) {
		t.Fatal("a notice the moment the first IPAddress of an idle network began to wait")
	}
	if !noticeAfter(tr, clk, 30*time.Second) {
		t.Fatal("no notice: two IPAddresses unanswered for 30 s")
	}
	if noticeAfter(tr, clk, time.Minute) {
		t.Fatal("a second notice in the same quiet spell")
	}
	h.OnUpdate(ipAddress("a", false), ipAddress("a", true)) // an answer: SDN works again
	if noticeAfter(tr, clk, 29*time.Second) {
		t.Fatal("a notice 29 s after an answer")
	}
	if !noticeAfter(tr, clk, time.Second) {
		t.Fatal("no notice 30 s after the last answer, b still unanswered")
	}
	h.OnUpdate(ipAddress("b", false), ipAddress("b", true))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/c", Obj: ipAddress("c", true)})
	if noticeAfter(tr, clk, time.Minute) {
		t.Fatal("a notice with every IPAddress answered")
	}
}

// TestAQuietNetworkStallsWhileSDNAnswersAnother: answers on one network are no evidence that
// SDN serves another (its IPAM broken, its pool's component down): the quiet one is noticed.
func TestAQuietNetworkStallsWhileSDNAnswersAnother(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	h := tr.handler()
	h.OnAdd(onNetwork("lab", "stuck", false), false)
	for i := range 40 {
		clk.Step(time.Second)
		name := fmt.Sprintf("busy-%d", i)
		h.OnAdd(ipAddress(name, false), false)
		h.OnUpdate(ipAddress(name, false), ipAddress(name, true))
		tr.check()
	}
	if !stalled(tr) {
		t.Fatal("no notice: lab quiet for 40 s with an IPAddress unanswered while corp was answered every second")
	}
	if got := tr.LastAnswer(onNetwork("lab", "stuck", false)); !got.Equal(time.Unix(1000, 0)) {
		t.Errorf("lab's last answer %v, want none since the sync", got)
	}
}

// TestAnIPAddressMovedToAnotherNetworkWaitsThere: an edited networkRef moves the unanswered
// IPAddress from one network's count to the other's, so the old network is not left waiting.
func TestAnIPAddressMovedToAnotherNetworkWaitsThere(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	h := tr.handler()
	h.OnAdd(ipAddress("a", false), false)
	h.OnUpdate(ipAddress("a", false), onNetwork("lab", "a", false))
	h.OnUpdate(onNetwork("lab", "a", false), onNetwork("lab", "a", true))
	if noticeAfter(tr, clk, time.Minute) {
		t.Error("a notice after the moved IPAddress was answered on its new network")
	}
}

// TestADeletedUnansweredIPAddressNoLongerWaits: a deletion, also one the informer learned of
// late (DeletedFinalStateUnknown), leaves nothing waiting.
func TestADeletedUnansweredIPAddressNoLongerWaits(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	h := tr.handler()
	h.OnAdd(ipAddress("a", false), false)
	h.OnAdd(ipAddress("b", false), false)
	h.OnDelete(ipAddress("a", false))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: ipAddress("b", false)})
	if noticeAfter(tr, clk, time.Minute) {
		t.Error("a notice after every unanswered IPAddress was deleted")
	}
}

// TestStartSendsTheNoticeOnItsTicks: the running tracker looks on its own, every
// DefaultCheckInterval, and stops with its context.
func TestStartSendsTheNoticeOnItsTicks(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	tr.handler().OnAdd(ipAddress("a", false), false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- tr.Start(ctx) }()
	for !clk.HasWaiters() { // Start has made its ticker
		time.Sleep(time.Millisecond)
	}
	clk.Step(31 * time.Second)
	select {
	case <-tr.Stalls():
	case <-time.After(10 * time.Second):
		t.Fatal("no notice from the running tracker after 31 s of quiet")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v, want nil once its context ended", err)
	}
}

// TestStalledSaysWhetherTheNoticeOfTheSpellWasSent: Stalled is true for an IPAddress of a
// network once its stall notice has been sent, until SDN answers there again; another
// network's notice does not count.
func TestStalledSaysWhetherTheNoticeOfTheSpellWasSent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := synced(clk)
	h := tr.handler()
	h.OnAdd(ipAddress("a", false), false)
	late := ipAddress("late", false)
	if tr.Stalled(late) {
		t.Fatal("stalled before SDN was quiet for 30 s")
	}
	if !noticeAfter(tr, clk, 30*time.Second) || !tr.Stalled(late) {
		t.Fatal("not stalled once the notice was sent")
	}
	if tr.Stalled(onNetwork("lab", "elsewhere", false)) {
		t.Error("another network counts as stalled")
	}
	h.OnUpdate(ipAddress("a", false), ipAddress("a", true))
	if tr.Stalled(late) {
		t.Error("still stalled after SDN answered on the network")
	}
	h.OnAdd(ipAddress("b", false), false)
	if !noticeAfter(tr, clk, 30*time.Second) || !tr.Stalled(late) {
		t.Fatal("not stalled in the next quiet spell")
	}
	h.OnDelete(ipAddress("b", false))
	if tr.Stalled(late) {
		t.Error("still stalled with nothing left waiting")
	}
	h.OnAdd(ipAddress("c", false), false) // a new spell, from now: its own notice
	if tr.Stalled(late) || !noticeAfter(tr, clk, 30*time.Second) {
		t.Error("the spell that began with nothing waiting did not get its own notice 30 s later")
	}
}
