package vm

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// TestSDNsStallNoticeBringsBackTheVMsOfUnansweredAutoIPAddresses: the notice maps to the VMs
// owning an IPAddress SDN has not answered — not those whose addresses SDN answered, and no
// VM for an unanswered IPAddress no VM owns (a static one: its namers hear of its answer).
func TestSDNsStallNoticeBringsBackTheVMsOfUnansweredAutoIPAddresses(t *testing.T) {
	owned := func(name, vm string, answered bool) *sdnv1.IPAddress {
		ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if vm != "" {
			ip.OwnerReferences = []metav1.OwnerReference{{APIVersion: "virtualization.deckhouse.io/v1alpha2",
				Kind: "VirtualMachine", Name: vm, UID: types.UID("uid-" + vm), Controller: ptr.To(true)}}
		}
		if answered {
			ip.Status.Phase = sdnv1.IPAddressPhasePending
		}
		return ip
	}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(
		owned("a-1", "a", false), owned("b-1", "b", true), owned("static", "", false)).Build()
	r := &Reconciler{Client: c}
	got := r.vmsWaitingForSDN(context.Background(), &sdnv1.IPAddress{})
	want := []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "a"}}}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("VMs brought back: %v, want %v", got, want)
	}
}

// TestTheVMsOwnRequeuesAreAtTheDefaultPriority: a result without a priority gets 0 — else
// controller-runtime would requeue the VM at the priority it was last taken out with (the
// initial list's low one after a restart) — and an explicit one is kept.
func TestTheVMsOwnRequeuesAreAtTheDefaultPriority(t *testing.T) {
	if got := ownRequeue(reconcile.Result{RequeueAfter: time.Minute}); got.Priority == nil || *got.Priority != 0 || got.RequeueAfter != time.Minute {
		t.Errorf("ownRequeue = %+v, want the requeue at priority 0", got)
	}
	if got := ownRequeue(reconcile.Result{Priority: ptr.To(AnsweredPriority)}); *got.Priority != AnsweredPriority {
		t.Errorf("an explicit priority became %d", *got.Priority)
	}
}
