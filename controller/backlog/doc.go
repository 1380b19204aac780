// Package backlog tells whether SDN is working through a backlog of IPAddresses. It watches
// the IPAddresses of the manager's cache (on every replica, so the dry run of each one sees
// what the leader's reconciles see) and knows two things: when SDN last answered an
// IPAddress — wrote the first status on one that had none — as this process saw it, and when
// SDN has gone quiet for a while with IPAddresses still unanswered.
//
// The VM reconciler and the dry run pass the first to plan (plan.Options.SDNLastAnswer): an
// unanswered Auto IPAddress waits while SDN answers others, instead of being skipped after
// plan.UnansweredGrace, because skipping thousands of queued addresses at once doubles the
// work of SDN's consumers when SDN is already behind (plan.unansweredLeft). The second, the
// stall notice, brings the waiting VMs back as soon as SDN falls quiet, so a stopped SDN is
// still reported within plan.UnansweredGrace of its last answer.
package backlog
