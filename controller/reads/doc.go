// Package reads declares, once, what vmipam reads of the objects it watches but does not own
// — VirtualMachines, launcher pods, Namespaces, IPAddresses — and uses that one declaration
// twice: the manager's cache keeps only those fields (CacheOptions: a transform per kind, with
// repeating strings and maps interned, internal/intern), and the reconciler's watches let an
// update through only when it changes one of them (Changed). A field vmipam starts to read is
// added to the projection here, and both follow.
//
// What is read, and why (DESIGN.md §3.1, §4):
//
//	VirtualMachine  metadata (policies read every label and annotation) but managedFields and
//	                kubectl's last-applied-configuration; spec.networks; status.phase (a policy
//	                input) and each status.networks entry's type, name and MAC (a policy input,
//	                and what a NIC's name derives from).
//	launcher pod    name, namespace, UID, timestamps, the vm.kubevirt.io/name label, the
//	                networks-spec and decided annotations (what is applied), and whether it
//	                has finished (status.phase Succeeded or Failed). The controller's cache
//	                (NewCache) watches pods as metadata, unfinished ones only (a field
//	                selector on status.phase, which NewCache enforces):
//	                the phase is the field selector's, not a field it keeps.
//	Namespace       metadata (policies read its labels).
//	IPAddress       spec; of the status the address, network, phase and Allocated condition;
//	                owner references; of the annotations only the interface an Auto IPAddress
//	                serves.
//
// Trimming is safe because vmipam writes none of the trimmed kinds: it reads VMs, pods and
// Namespaces, and of IPAddresses it creates and deletes its own (a delete needs no more than
// the UID and resourceVersion kept).
package reads
