package virtualization

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// frozenPodCache makes s read launcher pods from a cache that stopped following the API server
// at this moment: later creations and deletions stay out of sight. It returns the client that
// sees the truth.
func frozenPodCache(t *testing.T, s *Simulator) client.Client {
	t.Helper()
	truth := s.Client
	snapshot := &corev1.PodList{}
	if err := truth.List(context.Background(), snapshot); err != nil {
		t.Fatal(err)
	}
	s.Client = interceptor.NewClient(truth.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if pods, ok := list.(*corev1.PodList); ok {
				o := (&client.ListOptions{}).ApplyOptions(opts)
				pods.Items = nil
				for _, p := range snapshot.Items {
					if o.Namespace == p.Namespace && vmNameOf(&p)[0] == o.FieldSelector.Requirements()[0].Value {
						pods.Items = append(pods.Items, p)
					}
				}
				return nil
			}
			return c.List(ctx, list, opts...)
		},
	})
	return truth
}

// realPods counts the launcher pods that exist.
func realPods(t *testing.T, c client.Client) int {
	t.Helper()
	list := &corev1.PodList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestLaggingCacheNeverCreatesASecondPod(t *testing.T) {
	s, _ := newSim(t, newVM("vm"))
	truth := frozenPodCache(t, s) // the cache will never show the pod the stand-in creates
	reconcileVM(t, s, "vm")
	reconcileVM(t, s, "vm")
	if n := realPods(t, truth); n != 1 {
		t.Errorf("launcher pods after two reconciles with a lagging cache = %d, want 1", n)
	}
	if got := getVM(t, s, "vm").Status.Phase; got != virtv1.PhaseRunning {
		t.Errorf("phase = %s, want Running", got)
	}
}

func TestLaggingCacheDoesNotBringBackADeletedPod(t *testing.T) {
	s, _ := newSim(t, newVM("vm", runPolicy(virtv1.RunPolicyManual), annotated(AnnotationPower, PowerOn)))
	reconcileVM(t, s, "vm")
	truth := frozenPodCache(t, s) // the cache keeps showing the running pod

	vm := getVM(t, s, "vm")
	vm.Annotations[AnnotationPower] = PowerOff
	if err := truth.Update(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	reconcileVM(t, s, "vm")
	if n := realPods(t, truth); n != 0 {
		t.Fatalf("launcher pods after a stop = %d, want 0", n)
	}

	vm = getVM(t, s, "vm")
	vm.Annotations[AnnotationPower] = PowerOn
	if err := truth.Update(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	reconcileVM(t, s, "vm")
	if n := realPods(t, truth); n != 1 {
		t.Errorf("launcher pods after a start with the deleted pod still cached = %d, want 1", n)
	}
}

// TestAPodCreatedAndDeletedOutOfSightIsRecreatedWhenTheExpectationLapses: the stand-in created
// a pod that someone deleted before its cache saw either; the expectation says the pod runs, so
// the VM must be looked at again when it lapses — no event would come — and then gets a pod.
func TestAPodCreatedAndDeletedOutOfSightIsRecreatedWhenTheExpectationLapses(t *testing.T) {
	s, clk := newSim(t, newVM("vm"))
	s.expect.ttl = 3 * time.Second
	truth := frozenPodCache(t, s) // the cache never shows the pod
	if res := reconcileVM(t, s, "vm"); res.RequeueAfter != 3*time.Second {
		t.Fatalf("after creating a pod the cache does not show: requeue after %v, want the TTL", res.RequeueAfter)
	}
	if err := truth.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if res := reconcileVM(t, s, "vm"); res.RequeueAfter != 2*time.Second || realPods(t, truth) != 0 {
		t.Fatalf("within the TTL: requeue after %v, %d pods; want 2s and none yet", res.RequeueAfter, realPods(t, truth))
	}
	clk.SetTime(clk.Now().Add(2 * time.Second))
	reconcileVM(t, s, "vm")
	if n := realPods(t, truth); n != 1 {
		t.Errorf("launcher pods once the expectation lapsed = %d, want 1", n)
	}
}
