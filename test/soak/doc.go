// Package soak is vmipam's chaos soak (`make soak`; a short seeded run is part of `make
// test`): a randomized, seeded stream of operations — VMs created, deleted, stopped, started,
// migrated, their networks and ipAddressName switched, static IPAddresses created, deleted and
// contested, pools filling and draining, networks flapping Ready or disappearing, policies
// edited (also into ones that do not compile) — against the real API server with both
// stand-ins, two controller replicas running as real binaries under leader election, and a
// fault-injecting reverse proxy between the controllers and the API server (5xx, 429 with
// Retry-After, latency, dropped watches), while replicas are killed (-9) and restarted.
// Invariants are checked continuously where cheap and in full at every quiet point; a failure
// prints the seed and the operation log, so that the stream replays.
package soak
