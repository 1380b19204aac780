package apiserver

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/scheme"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// A VM's launcher pods are looked up in a bucket that spans namespaces; a caller allowed to
// list pods in the VM's namespace only must get them, be asked for nothing more, and learn
// nothing of the bucket's other namespaces.
func TestTheGuardChecksABucketLookupInTheEvaluatedVMsNamespaceOnly(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	neighbour := "" // a VM of namespace other whose pods share demo/web's bucket
	for i := 0; neighbour == ""; i++ {
		if c := fmt.Sprintf("vm-%d", i); index.PodBucket("other", c) == index.PodBucket("demo", "web") {
			neighbour = c
		}
	}
	pod := func(namespace, vm string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "virt-launcher-" + vm,
			Labels: map[string]string{vmv1.LabelLauncherVMName: vm}}}
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(pod("demo", "web"), pod("other", "web"), pod("other", neighbour))
	if err := index.Setup(context.Background(), indexer{b}); err != nil {
		t.Fatal(err)
	}
	base := b.Build()
	guard := func(namespace string, asked *[]authorizer.AttributesRecord) *readGuard {
		return &readGuard{Reader: base, scheme: s, evaluated: client.ObjectKey{Namespace: namespace, Name: "web"},
			allowed: func(_ context.Context, a authorizer.AttributesRecord, _ string) error {
				*asked = append(*asked, a)
				if a.Namespace == "demo" {
					return nil
				}
				return apierrors.NewForbidden(corev1.Resource(a.Resource), a.Name, fmt.Errorf("only namespace demo"))
			}}
	}

	var asked []authorizer.AttributesRecord
	pods, err := index.LauncherPods(context.Background(), guard("demo", &asked), "demo", "web")
	if err != nil || len(pods) != 1 || pods[0].Namespace != "demo" {
		t.Fatalf("launcher pods of demo/web = %v, %v; want demo's one", pods, err)
	}
	if len(asked) != 1 || asked[0].Verb != "list" || asked[0].Resource != "pods" || asked[0].Namespace != "demo" {
		t.Errorf("asked %+v, want list pods in namespace demo only", asked)
	}

	asked = nil
	pods, err = index.LauncherPods(context.Background(), guard("empty", &asked), "empty", "web")
	if err != nil || len(pods) != 0 || len(asked) != 0 {
		t.Errorf("a VM whose namespace has nothing in the bucket: pods %v, err %v, asked %+v; want none, nil, nothing asked",
			pods, err, asked)
	}
}
