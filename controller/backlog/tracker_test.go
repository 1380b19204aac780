package backlog

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

func ipAddress(name string, answered bool) *sdnv1.IPAddress {
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	if answered {
		ip.Status.Phase = sdnv1.IPAddressPhaseAllocated
	}
	return ip
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
	tr := New(30*time.Second, clk)
	h := tr.handler()
	if got := tr.LastAnswer(); !got.Equal(clk.Now()) {
		t.Fatalf("before any answer: %v, want the tracker's creation %v", got, clk.Now())
	}
	h.OnAdd(ipAddress("a", false), true)
	h.OnAdd(ipAddress("b", true), true)
	clk.Step(5 * time.Second)
	h.OnUpdate(ipAddress("b", true), ipAddress("b", true)) // an attachment: not an answer
	if got := tr.LastAnswer(); !got.Equal(time.Unix(1000, 0)) {
		t.Errorf("after a later write: %v, want no answer noted", got)
	}
	h.OnUpdate(ipAddress("a", false), ipAddress("a", true))
	if got := tr.LastAnswer(); !got.Equal(clk.Now()) {
		t.Errorf("after a's first status: %v, want %v", got, clk.Now())
	}
}

// TestAStallNoticeComesOncePerQuietSpellWhileIPAddressesWait: SDN quiet for the quiet time with
// an IPAddress unanswered sends one notice; an answer re-arms it; nothing unanswered, no notice.
func TestAStallNoticeComesOncePerQuietSpellWhileIPAddressesWait(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := New(30*time.Second, clk)
	h := tr.handler()
	clk.Step(time.Minute)
	tr.check()
	if stalled(tr) {
		t.Fatal("a notice with nothing unanswered")
	}
	h.OnAdd(ipAddress("a", false), false)
	h.OnAdd(ipAddress("b", false), false)
	tr.check()
	if !stalled(tr) {
		t.Fatal("no notice: quiet for a minute with two IPAddresses unanswered")
	}
	clk.Step(time.Minute)
	tr.check()
	if stalled(tr) {
		t.Fatal("a second notice in the same quiet spell")
	}
	h.OnUpdate(ipAddress("a", false), ipAddress("a", true)) // an answer: SDN works again
	clk.Step(29 * time.Second)
	tr.check()
	if stalled(tr) {
		t.Fatal("a notice 29 s after an answer")
	}
	clk.Step(time.Second)
	tr.check()
	if !stalled(tr) {
		t.Fatal("no notice 30 s after the last answer, b still unanswered")
	}
	h.OnUpdate(ipAddress("b", false), ipAddress("b", true))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/c", Obj: ipAddress("c", true)})
	clk.Step(time.Minute)
	tr.check()
	if stalled(tr) {
		t.Fatal("a notice with every IPAddress answered")
	}
}

// TestADeletedUnansweredIPAddressNoLongerWaits: a deletion, also one the informer learned of
// late (DeletedFinalStateUnknown), leaves nothing waiting.
func TestADeletedUnansweredIPAddressNoLongerWaits(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := New(30*time.Second, clk)
	h := tr.handler()
	h.OnAdd(ipAddress("a", false), false)
	h.OnAdd(ipAddress("b", false), false)
	h.OnDelete(ipAddress("a", false))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: ipAddress("b", false)})
	clk.Step(time.Minute)
	tr.check()
	if stalled(tr) {
		t.Error("a notice after every unanswered IPAddress was deleted")
	}
}

// TestStartSendsTheNoticeOnItsTicks: the running tracker looks on its own, every
// DefaultCheckInterval, and stops with its context.
func TestStartSendsTheNoticeOnItsTicks(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	tr := New(30*time.Second, clk)
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
