// Package consumer is the decision record's semantics (DESIGN.md §2.3, docs/INTEGRATION.md):
// what a virtualization controller does with a VirtualMachineIPAM. It is pure Go — no client,
// no controller-runtime, no CEL — so that the enforcement point of any platform can call it
// from its handlers: the virtualization-controller stand-in of vmipam's tests does
// (test/sim/virtualization), and so does vmipam's dry run, to show what a VM would look like
// once its record is applied.
//
// Apply takes what the consumer knows — the VM's additional spec.networks entries with their
// MACs, its record, what its running launcher pods carry, the current next-boot list — and
// returns the networks-spec for the next launcher pod (NextBoot), the one for every running
// pod (Live: what may be applied now), the interfaces held until the next start and the IPAM
// items of NetworkReady. The rules:
//
//   - A record decides when it is for this VM (spec.vmUID) and not older than the VM's
//     generation. Otherwise nothing applied changes (Live is what runs, NextBoot stays) and
//     every interface is reported pending (ReasonDecisionPending).
//   - attach: true is provisioned: a networks-spec entry, with ipAssignmentMode DHCP and the
//     IPAddress when the allocation is not None. attach: false is not; its reason and message
//     become its NetworkReady item, as does the reason of an attached interface with a
//     transient problem.
//   - On a running VM an interface whose entry differs from what runs (added, removed, another
//     address) changes live only when its decision says hotplug: true; otherwise what runs
//     stays until the next start, the interface is listed in Held (and, when the VM is to have
//     it but does not, gets an AwaitingRestart item). Removed interfaces the record lists
//     (removed: true) are held likewise; an applied interface the record does not list is
//     unplugged.
//   - A launcher pod started before any record existed (it lacks AnnotationDecided) is not
//     decided yet: the first record is its initial configuration and applies whatever hotplug
//     says.
//   - A migration is not a start: the consumer keeps the running list on the template a
//     migration target is made from (Live), and only a start uses NextBoot.
package consumer
