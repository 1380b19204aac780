// Package naming derives the deterministic names vmipam gives the objects and NICs it manages:
// an interface's Auto IPAddress and its ifName in networks-spec. Deterministic names make
// Create the lock: two controller replicas or a stale cache can only ever race to create the
// same object, and the loser sees AlreadyExists.
package naming
