// Package samples embeds the example objects that run in the local sandbox (make demo) and in
// the tests that check it: networks, pools, IPAddresses and VirtualMachines covering Auto,
// Static, L2-only, a missing static IPAddress and one created later (later/). They are plain
// YAML an operator can also kubectl apply to a real cluster.
package samples
