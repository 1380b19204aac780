package virtualization

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ownKey names one object the stand-in writes: its kind and its namespace/name.
type ownKey struct {
	kind schema.GroupKind
	key  types.NamespacedName
}

// ownWrites remembers, per object, the resourceVersion the API server gave the stand-in's last
// write of it (a create, update or patch) until the stand-in's watch delivers that version —
// as controllers keep expectations of their own writes. Two things follow from it:
//
//   - reads (Simulator.get) come from the cache, except while it may not show the stand-in's
//     own last write of the object yet: then from the API server, so a reconcile never decides
//     from, or updates under, a version older than what it wrote itself (which would write
//     again, conflict, or — for the power state an operation just set — start a pod it has
//     just stopped);
//   - the watch event of exactly that write, its echo, brings no reconcile (notOwnEcho): the
//     reconcile that wrote it already acted on it. Every other write — by SDN, by vmipam, by a
//     user, or a later one of the stand-in's own — gets its own watch event, and passes.
//
// Its zero value is ready to use; it is safe for concurrent use.
type ownWrites struct {
	mu sync.Mutex
	rv map[ownKey]string
}

// wrote records that the stand-in's write of obj (as the API server answered it) landed.
func (w *ownWrites) wrote(k ownKey, rv string) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv == nil {
		w.rv = map[ownKey]string{}
	}
	w.rv[k] = rv
}

// pending returns the resourceVersion of the stand-in's last write of k whose echo has not
// arrived yet.
func (w *ownWrites) pending(k ownKey) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.rv[k]
	return rv, ok
}

// observed reports whether rv is the version of the stand-in's last write of k, and forgets
// that write when it is: the cache now holds it.
func (w *ownWrites) observed(k ownKey, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if mine, ok := w.rv[k]; ok && mine == rv {
		delete(w.rv, k)
		return true
	}
	return false
}

// forget drops k's expectation when it is still rv: the cache has caught up past it without
// delivering it (a relist) or someone wrote after it.
func (w *ownWrites) forget(k ownKey, rv string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv[k] == rv {
		delete(w.rv, k)
	}
}

// ownKeyOf is obj's ownKey; a kind the scheme does not know gives an empty kind, which no
// write records.
func (s *Simulator) ownKeyOf(obj client.Object) ownKey {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" && s.Client != nil {
		gvk, _ = apiutil.GVKForObject(obj, s.Client.Scheme())
	}
	return ownKey{kind: gvk.GroupKind(), key: client.ObjectKeyFromObject(obj)}
}

// wrote records the stand-in's successful write of obj (which carries the API server's answer).
func (s *Simulator) wrote(obj client.Object) {
	s.own.wrote(s.ownKeyOf(obj), obj.GetResourceVersion())
}

// wroteForTheVMController forgets that the stand-in wrote obj: the operation controller
// wrote it (a power change, a migration target) for the VM controller to act on, so its
// watch event must reach the VM reconcile — dropping it as an echo left a started VM without
// a pod until some other event came (the lifecycle spec, one run in two).
func (s *Simulator) wroteForTheVMController(obj client.Object) {
	s.own.forget(s.ownKeyOf(obj), obj.GetResourceVersion())
}

// get reads key into obj from Reader (the cache), or past it (live) while the cache may not
// show the stand-in's own last write of the object yet (ownWrites).
func (s *Simulator) get(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	err := s.reader().Get(ctx, key, obj)
	if s.live == nil {
		return err
	}
	k := s.ownKeyOf(obj)
	k.key = key
	rv, pending := s.own.pending(k)
	switch {
	case !pending, err == nil && obj.GetResourceVersion() == rv:
		return err
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	cached := ""
	if err == nil {
		cached = obj.GetResourceVersion()
	}
	if err := s.live.Get(ctx, key, obj); err != nil {
		return err
	}
	if obj.GetResourceVersion() == cached {
		s.own.forget(k, rv) // the cache is current: it went past the write without its echo
	}
	return nil
}

// notOwnEcho drops the watch event of the stand-in's own last write of an object: its create
// or update, exactly as written (ownWrites). Deletions always pass.
func (s *Simulator) notOwnEcho() predicate.Funcs {
	theirs := func(obj client.Object) bool { return !s.own.observed(s.ownKeyOf(obj), obj.GetResourceVersion()) }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return theirs(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return theirs(e.ObjectNew) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return true },
	}
}
