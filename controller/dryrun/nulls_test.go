package dryrun_test

import (
	"testing"
)

// The API server drops a null in a field its schema does not declare nullable, and so must
// every decoder: `ipAddressName: null` is as if absent. Before, the dry run refused it with
// 400 (a null is not a string) while kubectl apply accepted the manifest.
func TestNullsArePrunedAsTheAPIServerDoes(t *testing.T) {
	e := newEngine(t)
	req := decode(t, e, `vm: {metadata: {name: web, namespace: demo, labels: null},
  spec: {networks: [{type: Main}, {type: ClusterNetwork, name: corp, ipAddressName: null}]}}
objects:
- {apiVersion: network.deckhouse.io/v1alpha1, kind: ClusterNetwork, metadata: {name: corp, labels: null},
   spec: {ipam: {ipAddressPoolRef: {kind: ClusterIPAddressPool, name: corp-pool}}}, status: {conditions: null}}
policies:
- {apiVersion: ipam.virtualization.deckhouse.io/v1alpha1, kind: ClusterIPAMPolicy, metadata: {name: p},
   spec: {priority: null, hotplug: {expression: "true"}}}
`)
	if req == nil {
		t.Fatal("no request")
	}
	p, errs := e.CheckPolicy(nil, []byte(`{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
		"metadata": {"name": "p"}, "spec": {"priority": null, "hotplug": {"expression": "true"}}}`))
	if len(errs) > 0 || p == nil || p.Spec.Priority != 100 {
		t.Errorf("CheckPolicy = %+v, %v; want the null priority pruned and defaulted to 100", p, errs)
	}
}
