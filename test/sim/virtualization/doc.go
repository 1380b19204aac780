// Package virtualization is a STAND-IN for the Deckhouse virtualization controller ("VC") and
// KubeVirt. It is NOT the virtualization platform, NOT KubeVirt and NOT part of vmipam: it
// exists only so vmipam's tests and the local sandbox have VMs whose launcher pods, next-boot
// template and status come and go as they do on the real platform — with the record-consuming
// feature gate vmipam's integration contract asks VC for (DESIGN.md §2.3, §6;
// docs/INTEGRATION.md; ../shared/upstream/virtualization-controller.md is what it models).
// Never deploy it to a real cluster.
//
// The Simulator runs two controller-runtime controllers in the manager it is set up with:
//
//   - vc-stand-in-vm reconciles a VirtualMachine as VC does with additional networks:
//   - it follows spec.runPolicy (and the power state operations leave in AnnotationPower),
//     keeping one launcher pod (two while a migration runs) for a VM that should run and none
//     for one that should not; it recreates a launcher pod someone else deleted (a restart),
//     deletes the pods of a deleted VM (envtest's garbage collector may not run);
//   - it applies the VM's decision record (VirtualMachineIPAM) through vmipam's consumer
//     package (policies/consumer): the KubeVirt VM ("KVVM", kind
//     InternalVirtualizationVirtualMachine, the stand-in's CRD in test/crds/standin) holds the
//     template a launcher pod is made from — at a start the next-boot networks-spec and NIC
//     list, while the VM runs what runs (so a migration target carries what the source
//     carries, never a change held until restart); running pods get the live networks-spec by
//     a JSON merge patch first, and the KVVM of a running VM follows them only once SDN has
//     configured them — every launcher pod's networks-status present, reporting every live
//     interface, every interface's conditions True —, as VC's SyncKvvmHandler does (VC facts
//     §2; deckhouse/virtualization at cf3a9e6c4, isNetworkReadyOnPod in
//     pkg/controller/vm/internal/sync_kvvm.go). Until then the VM shows ConfigurationApplied
//     False and is looked at again every SDNRecheck, and SDN's answer on a pod wakes it. At a
//     start the template is written first (the pod is made from it); with no live interface
//     there is nothing to wait for (waitsForSDN says how that simplifies VC's rule);
//   - it copies every annotation of the VM onto its running pods, as VC's SyncMetadataHandler
//     does — a networks-spec annotation on the VM therefore overwrites the pods' (VC facts
//     §3), which is why nobody but VC may write it;
//   - it writes the whole VM status with an Update under the resourceVersion it read, as VC
//     does: phase, status.networks (each NIC's MAC, and the address SDN configured from the
//     pods' networks-status), NetworkReady (the record's IPAM items, plus "waiting for SDN"
//     while the networks-status of any launcher pod lacks an attached interface or reports an
//     interface with a condition that is not True, as VC's extractNetworkStatusFromPods finds
//     them over every pod),
//     AwaitingRestartToApplyConfiguration and ConfigurationApplied (False while the KVVM waits
//     for SDN, absent otherwise); status fields it does not know are kept;
//   - it writes the record's status.observedGeneration once a record is applied: its running
//     pods and its KVVM follow it (not while the KVVM waits for SDN).
//   - vc-stand-in-operation carries out VirtualMachineOperations of type Start, Stop, Restart
//     and Migrate once, moving them InProgress → Completed (or Failed).
//
// A launcher pod (virt-launcher-<vm>-xxxxx, label vm.kubevirt.io/name, controller owner
// reference to the VM, one container of image "stand-in") gets the KVVM template's annotations
// when it is created, as KubeVirt copies them. No kubelet runs, so launcher pods stay Pending;
// the stand-in treats every pod it made that is not being deleted as running (VC's active pods).
// A pod wakes the VM its vm.kubevirt.io/name label names, whoever controls it, on its create and
// delete and on an update of its phase or networks-status — what VC's PodWatcher lets through —
// so a labelled pod no VM controls (made from an older read of the template) gets the record
// as soon as it appears; and on the start of its deletion, which on a cluster the kubelet's
// phase change would bring. Its other watches differ from VC's where it does not need theirs:
// a KVVM wakes its VM on any update not its own (VC: on changes of the KVVM's status, which
// the stand-in's KVVMs do not have), and VC's watches of the KVVMI, the networks' Ready and
// the IPAddresses' Allocated are not modelled — what the stand-in shows of them comes through
// the record, whose every change wakes the VM.
//
// Work on one VM is serialized by a per-VM mutex across both controllers (different VMs run
// in parallel, Workers at a time). VMs, records, KVVMs and operations are read from the cache,
// and past it while the cache may not show the stand-in's own last write of them yet (Reader);
// launcher pods are read from the cache through an index by VM name and
// corrected by expectations — the pods the stand-in created or deleted that the cache does not
// show yet, as KubeVirt keeps them — so a lagging cache never makes it create a second pod.
package virtualization
