package dryrun_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/vmipam/vmipam/controller/dryrun"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Offline, as `ipamctl evaluate` does: only the request's objects exist, and the shipped
// default policies decide.
func ExampleEngine_Evaluate() {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	_ = sdnv1.AddToScheme(scheme)
	_ = vmv1.AddToScheme(scheme)
	compiler, _ := evaluator.NewCompiler(evaluator.DefaultLimits)
	engine, _ := dryrun.NewEngine(compiler, scheme)

	req, err := engine.Decode([]byte(`
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
