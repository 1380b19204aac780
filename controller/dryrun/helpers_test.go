package dryrun_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/scheme"
	"github.com/vmipam/vmipam/evaluator"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newEngine(t *testing.T) *dryrun.Engine {
	t.Helper()
	c, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	e, err := dryrun.NewEngine(c, newScheme(t))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// builderIndexer registers vmipam's indexes with a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// fakeCluster is a reader holding objs, indexed like the manager's cache.
func fakeCluster(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(objs...)
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// decode decodes body, failing the test on error.
func decode(t *testing.T, e *dryrun.Engine, body string) *dryrun.Request {
	t.Helper()
	req, err := e.Decode(context.Background(), []byte(body), dryrun.DecodeOptions{})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return req
}

const readyCondition = `{type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}`

// corp is a Ready pooled ClusterNetwork manifest.
const corp = `{apiVersion: network.deckhouse.io/v1alpha1, kind: ClusterNetwork, metadata: {name: corp},
  spec: {ipam: {ipAddressPoolRef: {kind: ClusterIPAddressPool, name: corp-pool}}}, status: {conditions: [` + readyCondition + `]}}`
