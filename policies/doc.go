// Package policies ships vmipam's default ClusterIPAMPolicies as YAML, embedded in the binary.
//
// The controller applies them at start-up when absent (never overwriting an admin's edit), and
// the evaluator compiles the same "default" policy as the built-in fallback that decides when
// no installed policy matches an interface, so VM users never depend on an admin having
// installed anything. The API types live in the v1alpha1 sub-package.
package policies
