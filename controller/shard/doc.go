// Package shard makes one vmipam deployment serve a set of namespaces (docs/SCALING.md): it
// narrows the manager's cache, and so what is reconciled, to them.
package shard
