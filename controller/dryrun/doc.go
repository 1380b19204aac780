// Package dryrun answers "what would the controller do to this VM?" without writing anything
// (DESIGN.md §5). Its Engine is shared by the controller's dry-run API server
// (controller/dryrun/apiserver, which serves Evaluations) and by `ipamctl evaluate`
// (offline), so that both give the same answer for the same input — and the same as a
// reconcile, because the evaluation is controller/plan's Compute, the reconciler's
// observation, decisions and plan, over a reader with the request's objects laid over it.
//
// A request (Body: an Evaluation's spec, or what ipamctl reads from files) holds:
//
//	vm:        a VirtualMachine manifest (it may or may not exist)
//	policies:  optional ClusterIPAMPolicy manifests that replace the installed policies for
//	           this request (present but empty: only the built-in default decides)
//	objects:   optional objects laid over the cluster's state for this request: IPAddress,
//	           Network, IPAddressPool, VirtualMachine, VirtualMachineIPAM and Pod in the
//	           VM's namespace;
//	           ClusterNetwork and ClusterIPAddressPool; the VM's Namespace
//
// Engine.DecodeBody validates it as the API server would validate the manifests on create
// (CRD schemas, metadata), compiles the candidate policies as the admission webhook would,
// and reports every problem it finds at once, each with its JSON path, in an *InvalidError:
// spec.vm.spec.networks[1].type: Unsupported value: "Bogus": …; spec.policies[0].spec.nmae:
// Invalid value: unknown field; spec.policies[1].spec.skipRules[0].expression: … undeclared
// reference …; spec.objects[0].metadata.namespace: …. The VM, each policy and each object
// are checked on their own, so fixing one problem does not reveal the next. A VM without an
// additional network is answered too: the controller still acts on it (its record lets go of
// what the pod carries, its Auto IPAddresses are released). With
// DecodeOptions.Authorize (the API server), the caller is authorized once the VM's namespace
// is known, before anything is compiled. Engine.Evaluate lays the objects over the base
// reader (restricted to the VM's namespace and cluster-scoped networks and pools), merges the
// VM with its live copy and returns an Evaluation's status, converted from the plan by package
// convert (the one place internals become the API's types): per interface the decision with
// its trace, the actions (Auto IPAddresses to create and release, the record it would write)
// and, computed with the consumer package, what the VM would look like once the
// virtualization controller applies that record (networks-spec at the next start and on the
// running pods, interfaces held until restart, status.networks and conditions).
package dryrun
