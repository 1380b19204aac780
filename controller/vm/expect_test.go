package vm

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func TestCreatedIPAddressIsReadUntilTheCacheShowsIt(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).Build()
	r := expectingReader{Reader: c, own: own}
	key := types.NamespacedName{Namespace: "ns", Name: "web-corp"}
	created := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-corp", UID: "ip-uid", ResourceVersion: "5"}}
	own.expectCreated(created)

	got := &sdnv1.IPAddress{}
	if err := r.Get(context.Background(), key, got); err != nil || got.UID != "ip-uid" {
		t.Fatalf("before the cache shows it: got %v, %v; want the created IPAddress", got.UID, err)
	}
	if !own.creationObserved(created) {
		t.Error("the creation event of the object as created is vmipam's own")
	}
	if err := r.Get(context.Background(), key, &sdnv1.IPAddress{}); !apierrors.IsNotFound(err) {
		t.Errorf("once observed (and gone from the cache), got %v, want NotFound", err)
	}
	own.expectCreated(created)
	now = now.Add(ExpectationTTL + time.Second)
	if err := r.Get(context.Background(), key, &sdnv1.IPAddress{}); !apierrors.IsNotFound(err) {
		t.Errorf("past ExpectationTTL, got %v, want NotFound", err)
	}
	allocated := created.DeepCopy()
	allocated.ResourceVersion = "6"
	own.expectCreated(created)
	if own.creationObserved(allocated) {
		t.Error("a later version (SDN's answer) is missed to the VM")
	}
}

// TestTheRecordIsReadAsWrittenUntilTheCacheShowsIt: a reconcile that runs before the cache shows
// vmipam's record write decides from what it wrote, not from the older record (which would lose
// a conflict and write again); once the cache shows another writer's version, the cache wins.
// The event of the write itself is vmipam's own, and consumed.
func TestTheRecordIsReadAsWrittenUntilTheCacheShowsIt(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	cached := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "3", UID: "rec"}}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(cached).Build()
	r := expectingReader{Reader: c, own: own}
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	inCache := &v1alpha1.VirtualMachineIPAM{}
	if err := c.Get(context.Background(), key, inCache); err != nil {
		t.Fatal(err)
	}
	written := inCache.DeepCopy()
	written.ResourceVersion, written.Spec.VMGeneration = "4", 2
	own.wroteRecord(inCache, written)

	got := &v1alpha1.VirtualMachineIPAM{}
	if err := r.Get(context.Background(), key, got); err != nil || got.Spec.VMGeneration != 2 {
		t.Errorf("while the cache shows the version written over: got generation %d (%v), want vmipam's write", got.Spec.VMGeneration, err)
	}
	if !own.recordWriteObserved(written) {
		t.Error("the event of vmipam's own write was not recognised")
	}
	if own.recordWriteObserved(written) {
		t.Error("an own write's event was recognised twice")
	}
	own.wroteRecord(inCache, written)
	if err := c.Delete(context.Background(), inCache); err != nil {
		t.Fatal(err)
	}
	theirs := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "rec2"}}
	if err := c.Create(context.Background(), theirs); err != nil {
		t.Fatal(err)
	}
	got = &v1alpha1.VirtualMachineIPAM{}
	if err := r.Get(context.Background(), key, got); err != nil || got.UID != "rec2" {
		t.Errorf("after another writer's version: got %s (%v), want the cache's", got.UID, err)
	}
}

// The watch may deliver a write's event before the write's answer: the verdict on it waits for
// the answer, so vmipam's own write brings nothing and another writer's still brings the VM.
func TestEventDuringAWriteIsJudgedAfterItsAnswer(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	observed := &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "1", UID: "rec"}}
	written := observed.DeepCopy()
	written.ResourceVersion = "2"
	theirs := observed.DeepCopy()
	theirs.ResourceVersion = "3"

	k := own.writeStarted(written)
	if own.shouldEnqueue(k, func() bool { return !own.recordWriteObserved(written) }) {
		t.Fatal("an event during the write was judged before the write's answer")
	}
	own.wroteRecord(observed, written)
	if own.writeFinished(k) {
		t.Error("the echo of vmipam's own write was missed")
	}
	k = own.writeStarted(written)
	own.shouldEnqueue(k, func() bool { return !own.recordWriteObserved(theirs) })
	if !own.writeFinished(k) {
		t.Error("another writer's change that arrived during vmipam's write was dropped")
	}
	if !own.shouldEnqueue(k, func() bool { return true }) {
		t.Error("with no write in flight an event is judged at once")
	}
}

// The consumer writes the record's status after each of vmipam's writes, and vmipam's next
// write may be made over that status write: a cache that shows only the status write still
// predates vmipam's write (an older generation) and is read as written; once it shows the
// written generation it is current.
func TestARecordWrittenOverAStatusWriteIsReadAsWrittenUntilTheCacheShowsIt(t *testing.T) {
	own, key := recordExpectations()
	observed := webRecord("3", 1)
	written := observed.DeepCopy()
	written.ResourceVersion, written.Generation, written.Spec.VMGeneration = "5", 2, 2 // made over the status write "4"
	own.wroteRecord(observed, written)

	statusOnly := observed.DeepCopy()
	statusOnly.ResourceVersion, statusOnly.Status.ObservedGeneration = "4", 1
	if got := own.newerRecord(key, statusOnly); got == nil || got.Spec.VMGeneration != 2 {
		t.Errorf("cache shows the consumer's status write: got %v, want vmipam's write", got)
	}
	if got := own.newerRecord(key, written); got != nil {
		t.Errorf("cache shows the write: got %v, want the cache", got)
	}
	if !own.recordWriteObserved(written) {
		t.Error("the write's own event was not recognised after the cache showed it")
	}
	own.wroteRecord(observed, written)
	theirs := observed.DeepCopy()
	theirs.ResourceVersion, theirs.Generation = "6", 3
	if got := own.newerRecord(key, theirs); got != nil {
		t.Errorf("cache shows another writer's spec: got %v, want the cache", got)
	}
	if got := own.newerRecord(key, statusOnly); got != nil {
		t.Error("the expectation outlived another writer's version")
	}
}

// Three writes in quick succession: the cache may still show the version before the first
// when the third is decided. It predates the last write (an older generation) and is read as
// that write left it, not as another writer's version (which made the third write a conflict:
// 3 of 20,000 record patches in round 11 at 10k).
func TestACacheTwoWritesBehindIsReadAsTheLastWrite(t *testing.T) {
	own, key := recordExpectations()
	first := webRecord("3", 1)
	second := first.DeepCopy()
	second.ResourceVersion, second.Generation = "4", 2
	third := second.DeepCopy()
	third.ResourceVersion, third.Generation, third.Spec.VMGeneration = "5", 3, 7
	own.wroteRecord(first, second)
	own.wroteRecord(second, third)
	if got := own.newerRecord(key, first); got == nil || got.Spec.VMGeneration != 7 {
		t.Errorf("cache two writes behind: got %v, want the last write", got)
	}
	recreated := first.DeepCopy()
	recreated.UID = "rec2"
	if got := own.newerRecord(key, recreated); got != nil {
		t.Errorf("a record recreated under the same name (older generation, other UID): got %v, want the cache", got)
	}
}

// An owner reference vmipam added and someone removed again leaves the generation where it
// was; that version is another writer's, not one that predates vmipam's write, and the cache
// wins (the reconcile then puts the reference back).
func TestAnOwnerReferenceRemovedAfterVmipamAddedItIsAnotherWritersVersion(t *testing.T) {
	own, key := recordExpectations()
	observed := webRecord("10", 3)
	written := observed.DeepCopy()
	written.ResourceVersion = "11"
	written.OwnerReferences = []metav1.OwnerReference{{APIVersion: "virtualization.deckhouse.io/v1alpha2", Kind: "VirtualMachine", Name: "web", UID: "vm"}}
	own.wroteRecord(observed, written)
	reverted := observed.DeepCopy()
	reverted.ResourceVersion = "12"
	if got := own.newerRecord(key, reverted); got != nil {
		t.Errorf("owner reference removed after vmipam's write: got vmipam's write, want the cache")
	}
}

// recordExpectations are write expectations at a fixed time, and the key of record ns/web.
func recordExpectations() (*writeExpectations, types.NamespacedName) {
	now := time.Unix(1000, 0)
	return newOwnWrites(func() time.Time { return now }), types.NamespacedName{Namespace: "ns", Name: "web"}
}

// webRecord is record ns/web (UID rec) at resourceVersion rv and generation.
func webRecord(rv string, generation int64) *v1alpha1.VirtualMachineIPAM {
	return &v1alpha1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv, UID: "rec", Generation: generation}}
}
