package vm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// ExpectationTTL is how long vmipam trusts its own write over a cache that has not shown it yet
// (the ReplicaSet controller's ExpectationsTimeout is 5 minutes; a watch delivers in
// milliseconds, so a minute is long past a healthy lag). A created IPAddress that the cache
// never shows — deleted again before the watch saw it — is looked for anew after it.
const ExpectationTTL = time.Minute

// ownWrites are the expectations of vmipam's own writes, as the ReplicaSet controller and
// KubeVirt's controllers keep them: what vmipam wrote and the watch has not delivered yet.
//
//   - created: the Auto IPAddresses it created, as the API server returned them. A reconcile
//     that runs before the cache shows one (another event brought the VM back) reads it from
//     here instead of creating it again and being refused with AlreadyExists.
//   - patched: per VM and per pod, the resourceVersion transition of its last patch of which
//     vmipam knows the whole effect — the object the API server returned differs from the one
//     the reconcile observed only by what vmipam wrote. The watch event of exactly that
//     transition shows the reconcile nothing new, so it does not bring the VM back.
//
// Expectations are consumed by the event that shows them and lapse after ExpectationTTL.
type ownWrites struct {
	mu      sync.Mutex
	now     func() time.Time
	created map[types.NamespacedName]expectedIPAddress
	patched map[patchKey]chain
	// specWrites is, per VM and pod, the resourceVersion of vmipam's last networks-spec patch
	// of it, verified or not, and when: echoOfSpecWrite recognises the event of that write.
	specWrites map[patchKey]specWrite
	swept      time.Time // when specWrites was last swept
	// inflight counts the writes of an object (a VM, pod or IPAddress) issued and not yet
	// answered; deferred holds the verdicts on its events that arrived meanwhile (judge).
	inflight map[patchKey]int
	deferred map[patchKey][]func() bool
}

// specWrite is the resourceVersion a networks-spec patch returned and when.
type specWrite struct {
	version string
	at      time.Time
}

// expectedIPAddress is a created IPAddress and when it was created.
type expectedIPAddress struct {
	ip *sdnv1.IPAddress
	at time.Time
}

// patchKey names a patched object: its kind and key.
type patchKey struct {
	kind string
	key  types.NamespacedName
}

// keyOf is obj's patchKey; the kind is its Go type (*v1alpha2.VirtualMachine, *v1.Pod), which
// the cache's objects and the API server's answers share.
func keyOf(obj client.Object) patchKey {
	return patchKey{kind: fmt.Sprintf("%T", obj), key: client.ObjectKeyFromObject(obj)}
}

// chain is the resourceVersions an object went through by vmipam's own patches, oldest first,
// the object as the last of them returned it, and when it was added.
type chain struct {
	versions []string
	last     client.Object
	at       time.Time
}

func newOwnWrites(now func() time.Time) *ownWrites {
	return &ownWrites{now: now, created: map[types.NamespacedName]expectedIPAddress{}, patched: map[patchKey]chain{},
		specWrites: map[patchKey]specWrite{}, inflight: map[patchKey]int{}, deferred: map[patchKey][]func() bool{}}
}

// expectCreated records an IPAddress vmipam created, as the API server returned it.
func (o *ownWrites) expectCreated(ip *sdnv1.IPAddress) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.created[client.ObjectKeyFromObject(ip)] = expectedIPAddress{ip: ip.DeepCopy(), at: o.now()}
}

// createdIPAddress returns the IPAddress vmipam created under key and the cache has not shown,
// or nil.
func (o *ownWrites) createdIPAddress(key types.NamespacedName) *sdnv1.IPAddress {
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
	return e.ip
}

// observedIPAddress forgets the creation of ip's key, now that the cache shows the name (ip,
// or any later version of it, or its deletion); it reports whether ip is exactly the object
// vmipam created: an event that shows nothing the creating reconcile did not know.
func (o *ownWrites) observedIPAddress(ip client.Object) bool {
	key := client.ObjectKeyFromObject(ip)
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.created[key]
	delete(o.created, key)
	return ok && e.ip.UID == ip.GetUID() && e.ip.ResourceVersion == ip.GetResourceVersion()
}

// expectPatched records that vmipam's patch turned observed into written (a VM or pod, as
// the API server returned it), of which vmipam knows the whole effect when verified is true: a
// patch under observed's resourceVersion as optimistic lock, or onlyOurChange(observed,
// written). An unverified patch drops the object's expectations instead, so that the event
// bringing another writer's change is never mistaken for vmipam's own.
func (o *ownWrites) expectPatched(observed, written client.Object, verified bool) {
	k := keyOf(observed)
	o.mu.Lock()
	defer o.mu.Unlock()
	if !verified {
		delete(o.patched, k)
		return
	}
	c := o.patched[k]
	if n := len(c.versions); n == 0 || c.versions[n-1] != observed.GetResourceVersion() {
		c.versions = []string{observed.GetResourceVersion()}
	}
	c.versions, c.at = append(c.versions, written.GetResourceVersion()), o.now()
	c.last = written.DeepCopyObject().(client.Object)
	o.patched[k] = c
}

// begin marks a write of obj as issued; done must follow once its answer is recorded.
//
// The watch may deliver a write's event before the write's answer reaches the writer (on a
// quiet API server it often does), so an expectation recorded after the answer misses its own
// event, which then brings the VM back for a reconcile that writes nothing. Expectations
// recorded before the write (the ReplicaSet controller's way) cannot know the resourceVersion
// the write makes; instead the verdict on an event that arrives during the write waits for
// its answer.
func (o *ownWrites) begin(obj client.Object) patchKey {
	k := keyOf(obj)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.inflight[k]++
	return k
}

// done ends a write begun with begin, after the caller recorded what it wrote, and reports
// whether an event that arrived during it showed news: the verdicts judge deferred, made now.
// The caller brings its VM back when it did, since the event itself enqueued nothing.
func (o *ownWrites) done(k patchKey) bool {
	o.mu.Lock()
	var verdicts []func() bool
	if o.inflight[k]--; o.inflight[k] <= 0 {
		delete(o.inflight, k)
		verdicts = o.deferred[k]
		delete(o.deferred, k)
	}
	o.mu.Unlock()
	news := false
	for _, v := range verdicts {
		news = v() || news // every verdict runs: each consumes its expectation
	}
	return news
}

// judge returns news() — whether an event of the object k shows its VM anything new — unless a
// write of k is in flight: then the verdict is deferred to that write's done, and judge
// returns false. An event that arrives when no write is in flight is not the echo of one that
// is still to come, and one that arrives after the answer finds its expectation recorded.
func (o *ownWrites) judge(k patchKey, news func() bool) bool {
	o.mu.Lock()
	if o.inflight[k] > 0 {
		o.deferred[k] = append(o.deferred[k], news)
		o.mu.Unlock()
		return false
	}
	o.mu.Unlock()
	return news()
}

// wroteNetworksSpec records the object (a VM or pod) as vmipam's networks-spec patch returned it.
// Records whose event never came (the object was deleted, a relist skipped the version) are
// swept once they are older than ExpectationTTL, at most once per ExpectationTTL.
func (o *ownWrites) wroteNetworksSpec(written client.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if now.Sub(o.swept) > ExpectationTTL {
		for k, w := range o.specWrites {
			if now.Sub(w.at) > ExpectationTTL {
				delete(o.specWrites, k)
			}
		}
		o.swept = now
	}
	o.specWrites[keyOf(written)] = specWrite{version: written.GetResourceVersion(), at: now}
}

// echoOfSpecWrite reports whether the update old → new is the event of vmipam's own last
// networks-spec patch (new is the version it returned) and shows nothing else vmipam reads
// (onlyOurChange), and forgets the write once its event came. It holds also when the patch
// itself was not verified — another writer's version came between the one the reconcile read
// and the patch —: that version came with an event of its own (old → new is one step of the
// informer's chain), which brought the VM back if it showed anything; this one shows only what
// vmipam wrote and planned.
func (o *ownWrites) echoOfSpecWrite(old, new client.Object) bool {
	k := keyOf(new)
	o.mu.Lock()
	w, ok := o.specWrites[k]
	if ok && (w.version == new.GetResourceVersion() || o.now().Sub(w.at) > ExpectationTTL) {
		delete(o.specWrites, k)
	}
	o.mu.Unlock()
	return ok && w.version == new.GetResourceVersion() && o.now().Sub(w.at) <= ExpectationTTL && onlyOurChange(old, new)
}

// newer returns a copy of the object as vmipam's own last patch of it returned it when obj is
// an earlier version in that patch's chain — the cache has not caught up with vmipam's own
// write, which nobody else's came between —, else nil. A reconcile that reads the copy does not
// write the same thing again.
func (o *ownWrites) newer(obj client.Object) client.Object {
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.patched[keyOf(obj)]
	if !ok || o.now().Sub(c.at) > ExpectationTTL {
		return nil
	}
	if i := slices.Index(c.versions, obj.GetResourceVersion()); i < 0 || i == len(c.versions)-1 {
		return nil
	}
	return c.last.DeepCopyObject().(client.Object)
}

// ownPatch reports whether the update old → new goes only through vmipam's own patches (one of
// them, or several the watch delivered as one), and forgets what the update shows.
func (o *ownWrites) ownPatch(old, new client.Object) bool {
	k := keyOf(new)
	o.mu.Lock()
	defer o.mu.Unlock()
	c, ok := o.patched[k]
	if !ok {
		return false
	}
	from, to := slices.Index(c.versions, old.GetResourceVersion()), slices.Index(c.versions, new.GetResourceVersion())
	if from < 0 || to <= from || o.now().Sub(c.at) > ExpectationTTL {
		delete(o.patched, k)
		return false
	}
	if c.versions = c.versions[to:]; len(c.versions) == 1 {
		delete(o.patched, k)
	} else {
		o.patched[k] = c
	}
	return true
}

// onlyOurChange reports whether written (a VM or pod as the API server returned it after
// vmipam's networks-spec patch) equals observed (as the reconcile read it from the cache) in
// everything vmipam reads but the networks-spec annotation.
func onlyOurChange(observed, written client.Object) bool {
	switch o := observed.(type) {
	case *vmv1.VirtualMachine:
		w, ok := written.(*vmv1.VirtualMachine)
		return ok && sameMeta(&o.ObjectMeta, &w.ObjectMeta) && o.Spec.RunPolicy == w.Spec.RunPolicy &&
			equality.Semantic.DeepEqual(o.Spec.Networks, w.Spec.Networks) && equality.Semantic.DeepEqual(o.Status, w.Status)
	case *corev1.Pod:
		w, ok := written.(*corev1.Pod)
		return ok && samePodRead(o, w)
	}
	return false
}

// samePodRead compares what vmipam reads of two versions of a launcher pod, apart from the
// networks-spec annotation it writes and the resourceVersion: its identity, its VM label, its
// deletion and phase — what changed() watches for. Nothing else of a pod's labels and
// annotations is read (the manager's cache does not even keep it: controller.slimLauncherPod),
// so a pod the cache shows and the full pod a patch returns compare equal when only vmipam's
// patch came between them.
func samePodRead(a, b *corev1.Pod) bool {
	return a.UID == b.UID && a.Generation == b.Generation && a.DeletionTimestamp.Equal(b.DeletionTimestamp) &&
		a.Labels[vmv1.LabelLauncherVMName] == b.Labels[vmv1.LabelLauncherVMName] && a.Status.Phase == b.Status.Phase
}

// sameMeta compares what vmipam reads of two versions of an object's metadata, apart from the
// networks-spec annotation it writes and the resourceVersion.
func sameMeta(a, b *metav1.ObjectMeta) bool {
	return a.UID == b.UID && a.Generation == b.Generation && equality.Semantic.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) &&
		maps.Equal(a.Labels, b.Labels) && maps.EqualFunc(withoutOurs(a.Annotations), withoutOurs(b.Annotations), func(x, y string) bool { return x == y })
}

// withoutOurs is annotations without the networks-spec annotation vmipam writes and kubectl's
// last-applied-configuration, which the cache drops.
func withoutOurs(annotations map[string]string) map[string]string {
	out := make(map[string]string, len(annotations))
	for k, v := range annotations {
		if k != sdnv1.AnnotationNetworksSpec && k != corev1.LastAppliedConfigAnnotation {
			out[k] = v
		}
	}
	return out
}

// expectingReader reads from the cache, but what vmipam wrote and the cache does not show yet
// from the expectations: the IPAddresses it created, and the VMs and launcher pods as its own
// last patch left them.
type expectingReader struct {
	client.Reader
	own *ownWrites
}

// List implements client.Reader.
func (r expectingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if pods, ok := list.(*corev1.PodList); ok {
		for i := range pods.Items {
			if w, ok := r.own.newer(&pods.Items[i]).(*corev1.Pod); ok {
				pods.Items[i] = *w
			}
		}
	}
	return nil
}

// Get implements client.Reader.
func (r expectingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if vm, ok := obj.(*vmv1.VirtualMachine); ok && err == nil {
		if w, ok := r.own.newer(vm).(*vmv1.VirtualMachine); ok {
			w.DeepCopyInto(vm)
		}
		return nil
	}
	ip, isIP := obj.(*sdnv1.IPAddress)
	if !isIP || !apierrors.IsNotFound(err) {
		if isIP && err == nil {
			r.own.observedIPAddress(ip) // the cache shows it: the expectation is met
		}
		return err
	}
	if created := r.own.createdIPAddress(key); created != nil { // created, not yet in the cache
		created.DeepCopyInto(ip)
		return nil
	}
	return err
}
