// Package policy keeps the compiled ClusterIPAMPolicies: the Watcher, on every replica,
// compiles each policy into the Registry when its generation changes; the Reconciler, on the
// leader, does the same and reports the outcome on the policy's status and in
// AnnotationLastGood; the Registry publishes an immutable evaluator.Set snapshot that VM
// reconciles and dry runs read without locks; and ApplyDefaults installs the shipped default
// policies when they are absent.
//
// # Last good generation
//
// A generation that fails to compile leaves the policy's last good generation in force;
// status.servingGeneration and the Ready condition (False, CompilationFailed, every error's
// field path, "generation N keeps serving") say so. A policy that never compiled is not used.
//
// The last good generation must survive a controller restart, and the API server keeps no
// old generations, so the reconciler records it on the object itself: whenever a generation
// compiles and serves, annotation AnnotationLastGood holds {"generation": N, "spec": …}.
// After a restart, a current generation that does not compile is replaced by the stored one,
// compiled as a stored policy (Compile(stored, stored): StoredExpressions environment). The
// choices behind this:
//
//   - An annotation, not status: status reports observations and is not restored by every
//     backup tool (Velero restores it only on request); an annotation travels with the
//     object through backups and `kubectl get -o yaml`, and for
//     a custom resource with a status subresource a metadata change does not bump
//     metadata.generation, so writing it triggers no recompilation loop.
//   - Not a ConfigMap or a second CRD: one object stays self-contained (no orphaned records, no
//     extra RBAC), at the price of the spec appearing twice in the object. A spec whose record
//     would exceed 128 KiB is not recorded (the Ready message says so) and an older record is
//     removed: a restart never serves a generation older than the newest one that compiled.
//   - Memory first: while the process runs, the compiled generation in the Registry is
//     authoritative and the annotation mirrors it. The reconciler also runs when the
//     annotation changes, so a record an admin deletes or edits is rewritten at once. An
//     admin who deletes it while the controller is down, and whose current generation does not
//     compile, gets Ready=False "the policy is not used until it compiles": exactly the case of
//     a policy that never compiled. Editing the record grants nothing: it needs the same
//     permission as editing the spec, and it is compiled like any spec before it serves.
//   - A record that cannot be read (unknown fields, bad JSON), that does not compile, or
//     whose generation is not older than the object's (copied from another object) is not
//     served and is left untouched; the Ready message names the reason.
//   - Identity is the UID: a policy deleted and re-created under the same name never inherits
//     the old one's serving generation.
//
// # Start-up
//
// Until every stored policy has been compiled once, a snapshot holds only some of them, and
// the built-in default would decide interfaces an installed policy governs. The Watcher
// therefore adds a start-up load that compiles every policy from the cache (no writes) on
// every replica and then closes Registry.Loaded; the VM reconciler and the dry-run API wait
// for it. A standby's registry is thus current (its dry-run answers use the installed
// policies, its readiness check passes), and a standby that takes over needs no reload.
//
// The validating webhook (package controller/webhook) rejects most broken policies before
// they are stored; everything above covers policies admitted while it was unavailable.
package policy
