// Package vmruntime is a STAND-IN for KubeVirt and the virtualization controller. It is NOT
// KubeVirt, NOT the virtualization platform and NOT part of vmipam: it exists only so vmipam's
// tests and the local sandbox have VMs whose launcher pods come and go the way they do on the
// real platform (DESIGN.md §6). Never deploy it to a real cluster.
//
// The Simulator runs two small controller-runtime controllers in the manager it is set up with:
//
//   - vmruntime-sim-vm follows a VirtualMachine's spec.runPolicy (and the power state
//     operations leave in the AnnotationPower annotation): it keeps exactly one launcher pod
//     (two while a migration runs) for a VM that should run and none for one that should not,
//     recreates a launcher pod someone else deleted (a restart), deletes the pods of a deleted
//     VM (envtest has no garbage collector), and writes status.phase and the entries of
//     status.networks with their macAddress — preserving every field other writers own, in
//     particular status.networks[].ipAddress and status.conditions, which vmipam writes.
//   - vmruntime-sim-operation carries out VirtualMachineOperations of type Start, Stop,
//     Restart and Migrate once, moving them InProgress → Completed (or Failed).
//
// A launcher pod (virt-launcher-<vm>-xxxxx, label vm.kubevirt.io/name, controller owner
// reference to the VM, one container of image "stand-in") gets a copy of the VM's
// networks-spec annotation when it is created. No kubelet runs, so launcher pods stay Pending.
//
// Work on one VM is serialized by a per-VM mutex across both controllers (different VMs run
// in parallel, Workers at a time). VMs and operations are read uncached (through Reader);
// launcher pods are read from the cache through an index by VM name and corrected by
// expectations — the pods the stand-in created or deleted that the cache does not show yet, as
// KubeVirt keeps them — so a lagging cache never makes it create a second pod, and a VM's
// reconcile does not list every pod of the namespace on the API server (quadratic at 10,000).
package vmruntime
