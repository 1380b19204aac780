// Package cli is ipamctl (also kubectl-ipam, i.e. `kubectl ipam`): cobra commands that share
// one dryrun.Engine with the controller's dry-run API server, so that offline and online
// answers agree.
//
//	evaluate -f vm.yaml [-p policy.yaml]… [-O objects.yaml]… [-o table|json|yaml]
//	    offline: the VM against the given objects only (nothing else exists), decided by the
//	    given policies or, without -p, by the shipped defaults as a fresh cluster has them.
//	dry-run -f vm.yaml [-p …] [-O …] [-o …] [--kubeconfig, --context, -n, --as, …]
//	    the same question as an Evaluation (dryrun.ipam.virtualization.deckhouse.io/v1alpha1)
//	    created through the kubeconfig's API server, which authenticates the caller and
//	    passes the request to vmipam; answered from the live cluster, nothing written.
//	lint policy.yaml…
//	    validate, compile and type-check policies; every error with its field path.
//	test DIR|FILE…
//	    run policy test suites (policytest.Suite files); prints `N passed, N failed`.
//
// Exit codes: 0 success; 1 a failure (invalid input, lint errors, failed tests, an error
// answer from the API server); 2 a usage error.
package cli
