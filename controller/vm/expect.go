package vm

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// ExpectationTTL is how long vmipam trusts its own write over a cache that has not shown it yet
// (the ReplicaSet controller's ExpectationsTimeout is 5 minutes; a watch delivers in
// milliseconds, so a minute is long past a healthy lag). A created IPAddress that the cache
// never shows — deleted again before the watch saw it — is looked for anew after it.
const ExpectationTTL = time.Minute

// writeExpectations are the expectations of vmipam's own writes, as the ReplicaSet controller and
// KubeVirt's controllers keep them: what vmipam wrote and the watch has not delivered yet.
//
//   - created: the Auto IPAddresses it created, as the API server returned them. A reconcile
//     that runs before the cache shows one (another event brought the VM back) reads it from
//     here instead of creating it again and being refused with AlreadyExists.
//   - records: per VM, the record as its last write returned it and the resourceVersion that
//     write was made over. A reconcile that runs
//     before the cache shows the write reads the written record instead of deciding from the
//     older one (and losing a conflict), and the watch event of exactly that write shows
//     nothing new and does not bring the VM back.
//
// Expectations are consumed by the event that shows them and lapse after ExpectationTTL.
type writeExpectations struct {
	mu      sync.Mutex
	now     func() time.Time
	created map[types.NamespacedName]expected[*sdnv1.IPAddress]
	records map[types.NamespacedName]recordWrite
	swept   time.Time // when records was last swept
	// inflight counts the writes of an object (an IPAddress or record) issued and not yet
	// answered; deferred holds the verdicts on its events that arrived meanwhile (shouldEnqueue).
	inflight map[writeKey]int
	deferred map[writeKey][]func() bool
}

// expected is an object vmipam wrote and when.
type expected[T any] struct {
	obj T
	at  time.Time
}

// recordWrite is a record as vmipam's write returned it, the resourceVersion it was written
// over ("" for a create), and when.
type recordWrite struct {
	expected[*v1alpha1.VirtualMachineIPAM]
	from string
}

// recordIntent is what vmipam writes of a record, as one version of it shows it: a change of
// its spec moves the generation; the owner references are metadata. The consumer's status
// writes and other metadata leave both, so a version with the written intent has caught up
// with vmipam's write.
type recordIntent struct {
	uid        types.UID
	generation int64
	owners     []metav1.OwnerReference
}

// intentOf is rec's recordIntent.
func intentOf(rec *v1alpha1.VirtualMachineIPAM) *recordIntent {
	return &recordIntent{uid: rec.UID, generation: rec.Generation, owners: rec.OwnerReferences}
}

// shows reports whether rec has intent i.
func (i *recordIntent) shows(rec *v1alpha1.VirtualMachineIPAM) bool {
	return i != nil && rec != nil && rec.UID == i.uid && rec.Generation == i.generation &&
		equality.Semantic.DeepEqual(rec.OwnerReferences, i.owners)
}

// writeKey names a written object: its kind and key.
type writeKey struct {
	kind string
	key  types.NamespacedName
}

// keyOf is obj's writeKey; the kind is its Go type, which the cache's objects and the API
// server's answers share.
func keyOf(obj client.Object) writeKey {
	return writeKey{kind: fmt.Sprintf("%T", obj), key: client.ObjectKeyFromObject(obj)}
}

func newOwnWrites(now func() time.Time) *writeExpectations {
	return &writeExpectations{now: now, created: map[types.NamespacedName]expected[*sdnv1.IPAddress]{},
		records: map[types.NamespacedName]recordWrite{}, inflight: map[writeKey]int{}, deferred: map[writeKey][]func() bool{}}
}

// expectCreated records an IPAddress vmipam created, as the API server returned it.
func (o *writeExpectations) expectCreated(ip *sdnv1.IPAddress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.created[client.ObjectKeyFromObject(ip)] = expected[*sdnv1.IPAddress]{obj: ip.DeepCopy(), at: o.now()}
}

// createdIPAddress returns the IPAddress vmipam created under key and the cache has not shown,
// or nil.
func (o *writeExpectations) createdIPAddress(key types.NamespacedName) *sdnv1.IPAddress {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.created[key]
	if !ok {
		return nil
	}
	if o.now().Sub(e.at) > ExpectationTTL {
		delete(o.created, key)
		return nil
	}
	return e.obj
}

// creationObserved forgets the creation of ip's key, now that the cache shows the name (ip,
// or any later version of it, or its deletion); it reports whether ip is exactly the object
// vmipam created: an event that shows nothing the creating reconcile did not know.
func (o *writeExpectations) creationObserved(ip client.Object) bool {
	key := client.ObjectKeyFromObject(ip)
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.created[key]
	delete(o.created, key)
	return ok && e.obj.UID == ip.GetUID() && e.obj.ResourceVersion == ip.GetResourceVersion()
}

// wroteRecord records vmipam's write of a record: observed is the record it was written over
// (nil for a create), written as the API server returned it. Records whose event never came
// (the record was deleted, a relist skipped the version) are swept once they are older than
// ExpectationTTL, at most once per ExpectationTTL.
func (o *writeExpectations) wroteRecord(observed, written *v1alpha1.VirtualMachineIPAM) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if now.Sub(o.swept) > ExpectationTTL {
		for k, w := range o.records {
			if now.Sub(w.at) > ExpectationTTL {
				delete(o.records, k)
			}
		}
		o.swept = now
	}
	w := recordWrite{expected: expected[*v1alpha1.VirtualMachineIPAM]{obj: written.DeepCopy(), at: now}}
	if observed != nil {
		w.from = observed.ResourceVersion
	}
	o.records[client.ObjectKeyFromObject(written)] = w
}

// newerRecord returns a copy of the record as vmipam's own last write left it when cached
// predates that write — absent (nil) when it was a create, else the version it was written
// over or any version of an older generation (the consumer's status write that came between,
// or a cache more than one of vmipam's writes behind: the generation only grows, and the
// write's test proved no other spec write came between) —: the cache has not caught up with
// vmipam's write. Otherwise nil; a cached version that shows neither that nor the written
// generation and owners is another writer's (an owner reference removed again after vmipam's
// write too), and the expectation is forgotten (the event of the write itself consumes it:
// recordWriteObserved).
func (o *writeExpectations) newerRecord(key types.NamespacedName, cached *v1alpha1.VirtualMachineIPAM) *v1alpha1.VirtualMachineIPAM {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.records[key]
	if !ok {
		return nil
	}
	predates := cached == nil && w.from == "" ||
		cached != nil && (cached.ResourceVersion == w.from || cached.UID == w.obj.UID && cached.Generation < w.obj.Generation)
	switch {
	case predates && o.now().Sub(w.at) <= ExpectationTTL:
		return w.obj.DeepCopy()
	case !predates && !intentOf(w.obj).shows(cached):
		delete(o.records, key)
	}
	return nil
}

// recordWriteObserved reports whether rec, as an event delivers it, is the version vmipam's own last
// write of it returned — its event shows the VM's reconcile nothing it did not plan — and
// forgets the write once its event came.
func (o *writeExpectations) recordWriteObserved(rec client.Object) bool {
	key := client.ObjectKeyFromObject(rec)
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.records[key]
	if !ok || w.obj.ResourceVersion != rec.GetResourceVersion() || w.obj.UID != rec.GetUID() {
		return false
	}
	delete(o.records, key)
	return o.now().Sub(w.at) <= ExpectationTTL
}

// writeStarted marks a write of obj as issued; writeFinished must follow once its answer is recorded.
//
// The watch may deliver a write's event before the write's answer reaches the writer (on a
// quiet API server it often does), so an expectation recorded after the answer misses its own
// event, which then brings the VM back for a reconcile that writes nothing. Expectations
// recorded before the write (the ReplicaSet controller's way) cannot know the resourceVersion
// the write makes; instead the verdict on an event that arrives during the write waits for
// its answer.
func (o *writeExpectations) writeStarted(obj client.Object) writeKey {
	k := keyOf(obj)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight[k]++
	return k
}

// writeFinished ends a write begun with writeStarted, after the caller recorded what it wrote, and reports
// whether an event that arrived during it changed what vmipam reads: the verdicts shouldEnqueue deferred, made now.
// The caller brings its VM back when it did, since the event itself enqueued nothing.
func (o *writeExpectations) writeFinished(k writeKey) bool {
	o.mu.Lock()
	var verdicts []func() bool
	if o.inflight[k]--; o.inflight[k] <= 0 {
		delete(o.inflight, k)
		verdicts = o.deferred[k]
		delete(o.deferred, k)
	}
	o.mu.Unlock()
	missed := false
	for _, v := range verdicts {
		missed = v() || missed // every verdict runs: each consumes its expectation
	}
	return missed
}

// shouldEnqueue returns changed() — whether an event of the object k shows its VM anything new — unless a
// write of k is in flight: then the verdict is deferred to that write's writeFinished, and shouldEnqueue
// returns false. An event that arrives when no write is in flight is not the echo of one that
// is still to come, and one that arrives after the answer finds its expectation recorded.
func (o *writeExpectations) shouldEnqueue(k writeKey, changed func() bool) bool {
	o.mu.Lock()
	if o.inflight[k] > 0 {
		o.deferred[k] = append(o.deferred[k], changed)
		o.mu.Unlock()
		return false
	}
	o.mu.Unlock()
	return changed()
}

// expectingReader reads from the cache, but what vmipam wrote and the cache does not show yet
// from the expectations: the IPAddresses it created and the records it wrote.
type expectingReader struct {
	client.Reader
	own *writeExpectations
}

// Get implements client.Reader.
func (r expectingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	switch o := obj.(type) {
	case *v1alpha1.VirtualMachineIPAM:
		var cached *v1alpha1.VirtualMachineIPAM
		if err == nil {
			cached = o
		} else if !apierrors.IsNotFound(err) {
			return err
		}
		if w := r.own.newerRecord(key, cached); w != nil {
			w.DeepCopyInto(o)
			return nil
		}
		return err
	case *sdnv1.IPAddress:
		if err == nil {
			r.own.creationObserved(o) // the cache shows it: the expectation is met
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		if created := r.own.createdIPAddress(key); created != nil { // created, not yet in the cache
			created.DeepCopyInto(o)
			return nil
		}
	}
	return err
}
