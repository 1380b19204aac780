package sdn

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

func TestReconcileNetworkReady(t *testing.T) {
	held := map[string]string{AnnotationHoldNotReady: "true"}
	notReady := []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Broken", LastTransitionTime: metav1.Now()}}
	tests := []struct {
		name        string
		annotations map[string]string
		conditions  []metav1.Condition
		want        metav1.ConditionStatus // "" for no Ready condition
	}{
		{name: "network without Ready condition becomes Ready", want: metav1.ConditionTrue},
		{name: "held network stays without Ready condition", annotations: held},
		{name: "existing Ready condition is left alone", conditions: notReady, want: metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw := nsNet("lan", "")
			nw.Annotations, nw.Status.Conditions = tt.annotations, tt.conditions
			cn := clusterNet("corp", "")
			cn.Annotations, cn.Status.Conditions = tt.annotations, tt.conditions
			s, _ := newSim(t, nil, nw, cn)
			ctx := context.Background()
			if _, err := s.ReconcileNetwork(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "lan"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReconcileClusterNetwork(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "corp"}}); err != nil {
				t.Fatal(err)
			}
			gotNw, gotCn := &sdnv1.Network{}, &sdnv1.ClusterNetwork{}
			if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "lan"}, gotNw); err != nil {
				t.Fatal(err)
			}
			if err := s.Client.Get(ctx, types.NamespacedName{Name: "corp"}, gotCn); err != nil {
				t.Fatal(err)
			}
			for kind, conds := range map[string][]metav1.Condition{"Network": gotNw.Status.Conditions, "ClusterNetwork": gotCn.Status.Conditions} {
				var got metav1.ConditionStatus
				c := meta.FindStatusCondition(conds, sdnv1.ConditionReady)
				if c != nil {
					got = c.Status
				}
				if got != tt.want {
					t.Errorf("%s Ready = %q, want %q", kind, got, tt.want)
				}
				if got == metav1.ConditionTrue && tt.conditions == nil && c.Reason != "NetworkReady" {
					t.Errorf("%s Ready reason = %q, want SDN's NetworkReady", kind, c.Reason)
				}
			}
		})
	}
}
