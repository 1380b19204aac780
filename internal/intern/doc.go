// Package intern folds the strings and small maps that repeat across tens of thousands of
// cached objects into one shared copy each, so that a cache holds one copy of a namespace name
// or a label map instead of one per object: the JSON decoder allocates every string of every
// object it decodes, and a VM with its IPAddresses and launcher pod repeats the same
// twenty-odd strings.
//
// Strings are interned with Go's unique package (String, and the helpers for object metadata
// and conditions); maps by content in a bounded two-generation table (Maps). Both are safe for
// concurrent use. Interned values are read-only: see Maps for what that asks of readers.
package intern
