// Package backlog tells whether SDN is working through a backlog of IPAddresses. It watches
// the IPAddresses of the manager's cache (on every replica, so the dry run of each one sees
// what the leader's reconciles see) and knows two things per network (an IPAddress's
// spec.networkRef): when SDN last answered an IPAddress there — wrote the first status on one
// that had none — as this process saw it, never earlier than this process's informer synced;
// and when SDN has gone quiet there for a while with IPAddresses still unanswered.
//
// The VM reconciler and the dry run pass the first to plan (plan.Options.SDNLastAnswer): an
// unanswered Auto IPAddress waits while SDN answers others, instead of being skipped after
// plan.UnansweredGrace, because skipping thousands of queued addresses at once doubles the
// work of SDN's consumers when SDN is already behind (plan.unansweredLeft). The second, the
// stall notice, brings the waiting VMs back as soon as SDN falls quiet on a network, so a
// stopped SDN is still reported plan.UnansweredGrace (and up to DefaultCheckInterval) after
// the latest of its last answer there, the informer's sync and the moment the network's first
// address began to wait. The notice's receiver looks at the IPAddresses its cache shows when
// it takes it; one that appears later on a network already noticed (Tracker.Stalled) is for
// whoever sees it appear to bring back.
package backlog
