package overlay_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/overlay"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// An overlay without a base answers from its objects alone, including lists by vmipam's
// field indexes, registered with the same functions the manager's cache uses.
func Example() {
	scheme := runtime.NewScheme()
	_ = vmv1.AddToScheme(scheme)
	r := overlay.New(nil, scheme) // over a cache: overlay.New(mgr.GetCache(), scheme)
	_ = index.Setup(context.Background(), r)
	_ = r.Add(&vmv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: vmv1.VirtualMachineSpec{Networks: []vmv1.NetworksSpec{
			{Type: vmv1.NetworkTypeClusterNetwork, Name: "corp", IPAddressName: "web-ip"}}},
	})
	var list vmv1.VirtualMachineList
	_ = r.List(context.Background(), &list, client.InNamespace("demo"),
		client.MatchingFields{index.VMIPAddressName: "web-ip"})
	for _, v := range list.Items {
		fmt.Println(v.Name)
	}
	// Output: web
}
