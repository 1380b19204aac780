// Package overlay provides a client.Reader that answers from a set of in-memory objects laid
// over a base reader (usually the manager's cache), or from those objects alone when there is
// no base.
//
// The dry-run API lays the objects of one request (an IPAddress that does not exist yet,
// a Network as it will be after an edit, …) over the live cache, so that vm.Evaluate sees the
// world as it would be; ipamctl lays files over nothing, so that the same code answers
// offline. An overlay object replaces the base object of the same kind, namespace and name;
// the base is never written and the overlay lives as long as the Reader.
//
// List answers the same options the cache does: a namespace, a label selector and exact-match
// field selectors on registered field indexes (client.MatchingFields). Reader implements
// client.FieldIndexer, so the indexes are registered with the very functions the cache uses
// (index.Setup(ctx, reader)); an overlay object's index values are computed with them, so a
// list by index finds overlay objects exactly as the cache would find stored ones.
package overlay
