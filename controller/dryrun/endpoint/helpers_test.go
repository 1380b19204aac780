package endpoint_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/vmipam/vmipam/controller/index"
)

// counter returns the value of the series of a counter in controller-runtime's registry
// whose labels include labels, or 0.
func counter(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			if includes(have, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func includes(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// builderIndexer registers vmipam's indexes with a fake client builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.b.WithIndex(obj, field, fn)
	return nil
}

// emptyCluster is a reader with nothing in it, indexed like the manager's cache.
func emptyCluster(t *testing.T, s *runtime.Scheme) client.Reader {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(s)
	if err := index.Setup(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	return b.Build()
}
