// Package policy keeps the compiled ClusterIPAMPolicies: the Reconciler compiles each policy
// when its generation changes and reports the outcome on its status, the Registry publishes an
// immutable evaluator.Set snapshot that VM reconciles read without locks, and ApplyDefaults
// installs the shipped default policies when they are absent.
//
// A generation that fails to compile leaves the policy's last good generation in force (the
// status names the serving generation); a policy that never compiled is not used.
package policy
