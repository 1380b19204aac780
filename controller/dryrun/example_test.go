package dryrun_test

import (
	"context"
	"fmt"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/scheme"
	"github.com/vmipam/vmipam/evaluator"
)

// Offline, as `ipamctl evaluate` does: only the request's objects exist, and the shipped
// default policies decide.
func ExampleEngine_Evaluate() {
	s, _ := scheme.New()
	compiler, _ := evaluator.NewCompiler(evaluator.DefaultLimits)
	engine, _ := dryrun.NewEngine(compiler, s)

	req, err := engine.Decode(context.Background(), []byte(`
vm:
  metadata: {name: web, namespace: demo}
  spec:
    networks:
    - {type: Main}
    - {type: ClusterNetwork, name: storage}
    - {type: ClusterNetwork, name: corp, ipAddressName: web-ip}
objects:
- apiVersion: network.deckhouse.io/v1alpha1
  kind: ClusterNetwork
  metadata: {name: storage}
  status: {conditions: [{type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}]}
`), dryrun.DecodeOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := engine.Evaluate(context.Background(), nil, nil, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range res.Interfaces {
		fmt.Printf("%s/%s: %s, attached %v, reason %q\n", it.Type, it.Name, it.Decision.Allocation, it.Attached, it.Reason)
	}
	// Output:
	// ClusterNetwork/storage: None, attached true, reason ""
	// ClusterNetwork/corp: None, attached false, reason "NetworkNotFound"
}
