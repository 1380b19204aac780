// Package policytest runs policy test suites: YAML files of interface inputs and the
// decisions expected for them, run by the golden tests of samples/cases and by `ipamctl test`
// in admins' CI. docs/POLICY-TESTS.md documents the format. A suite:
//
//	apiVersion: cli.ipam.virtualization.deckhouse.io/v1alpha1
//	kind: PolicyTest
//	policies: [../policies/*.yaml]       # relative to the suite file; globs allowed
//	defaults:                            # an evaluator.Input (JSON names) every case starts from
//	  network: {exists: true, ready: true, ipamEnabled: true}
//	cases:
//	- name: static address on the shared network is refused
//	  input:                             # a JSON merge patch over defaults (null removes)
//	    interface: {type: ClusterNetwork, name: shared, ipAddressName: web}
//	  expect: {skip: true, reason: StaticAddressNotAllowed, policy: tenant-networks,
//	           provenance: {allocation: default, skip: tenant-networks, hotplug: default}}
//
// Load reads a suite and the policy files it names, Parse checks one without reading them,
// and Run compiles the policies as new ones (as the admission webhook would), with the shipped
// default as the built-in fallback, and decides every case with the evaluator the controller
// and the dry run use.
//
// Invariants: a case's input is applied over the defaults field by field (objects and maps
// merge, lists and scalars replace, null clears); only the expectations given are checked; a
// case no policy of the suite matches (only the built-in default decides) fails unless it
// expects `noPolicyMatched: true`.
package policytest
