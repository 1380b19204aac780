package plan

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// unchangedOnly lets only unchanged interfaces apply live: the golden "layered" case's policy.
var unchangedOnly = &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "unchanged-only"},
	Spec: v1alpha1.ClusterIPAMPolicySpec{Hotplug: &v1alpha1.Expression{Expression: "change.kind == 'None'"}}}

// A stopped VM's record is its applied state, and the plan writes it: the plan decides against
// the record it writes, so the next reconcile finds nothing to change. Before, the first
// decision saw no record (change Add: hotplug false under unchangedOnly), the record it wrote
// made the next one see change None (hotplug true): a record that was not a fixed point, which
// the dry run showed as a pending write until an unrelated event brought the VM back (the
// golden "layered" case failed so when no such event came).
func TestAStoppedVMsRecordIsAFixedPoint(t *testing.T) {
	vm, objs := corpWorld(true)
	vm.Spec.Networks[1].Name = "lan"
	lan := &sdnv1.ClusterNetwork{ObjectMeta: metav1.ObjectMeta{Name: "lan"}}
	lan.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test"}}
	objs = append(objs, lan)
	set := compiledSet(t, unchangedOnly)
	p, err := Compute(context.Background(), fakeWorld(t, objs...), set, vm, Options{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Record.Spec.Interfaces[0]; !d.Attach || !d.Hotplug {
		t.Fatalf("first reconcile: record %+v; want lan attached (L2) with hotplug true: nothing changes once it is written", d)
	}
	written := p.Record.DeepCopy()
	written.ResourceVersion = "1"
	q, err := Compute(context.Background(), fakeWorld(t, append(objs, written)...), set, vm, Options{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if q.RecordChanged {
		t.Errorf("the next reconcile changes the record it wrote: %+v -> %+v", p.Record.Spec.Interfaces, q.Record.Spec.Interfaces)
	}
}
