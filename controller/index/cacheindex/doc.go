// Package cacheindex registers the field indexes of package index on a controller-runtime
// cache (the manager's), keying each namespaced value once rather than twice as the cache's
// own IndexField does. It is apart from package index so that the index definitions — used
// also by the dry run's overlay reader and so by ipamctl — do not link controller-runtime's
// cache.
package cacheindex
