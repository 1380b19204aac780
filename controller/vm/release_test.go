package vm

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// unnamedFor records ip as found unnamed d ago, as earlier reconciles of vm would have: tests
// of what execute does once ReleaseGrace has passed start from here.
func unnamedFor(r *Reconciler, vm *vmv1.VirtualMachine, ip *sdnv1.IPAddress, d time.Duration) {
	r.releases.since = map[types.NamespacedName]map[types.UID]time.Time{
		client.ObjectKeyFromObject(vm): {ip.UID: r.now().Add(-d)},
	}
}

// TestAnUnwantedIPAddressWaitsReleaseGraceForAPodMadeFromAnOlderVM: a launcher pod is created
// from a copy of the VM's networks-spec taken before vmipam removed a name from it, and may
// appear only after vmipam's last read (the chaos soak's lost address, seed 1). The delete
// waits ReleaseGrace from the first reconcile that planned it, then reads the VM and its pods
// past the cache: a pod naming the IPAddress keeps it and starts the wait over. Before the wait
// ends nothing is read.
func TestAnUnwantedIPAddressWaitsReleaseGraceForAPodMadeFromAnOlderVM(t *testing.T) {
	ctx := context.Background()
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", UID: "u"}}
	auto := autoOf(vm, "corp", "10.0.0.5")
	ip := &auto
	ip.ResourceVersion = ""
	reads := 0
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(vm, ip).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			reads++
			return c.List(ctx, list, opts...)
		}}).Build()
	if err := c.Get(ctx, client.ObjectKeyFromObject(ip), ip); err != nil {
		t.Fatal(err)
	}
	clock := testingclock.NewFakePassiveClock(time.Now())
	r := &Reconciler{Client: c, APIReader: c, Clock: clock}
	step := func(what string, d time.Duration, wantWait time.Duration, wantGone bool, wantReads int) {
		t.Helper()
		clock.SetTime(clock.Now().Add(d))
		s := &scope{vm: vm, owned: []sdnv1.IPAddress{*ip}}
		if err := r.execute(ctx, s, &Plan{DeleteIPAddresses: []string{ip.Name}}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(ip), &sdnv1.IPAddress{})
		if gone := apierrors.IsNotFound(err); gone != wantGone || s.releaseAfter != wantWait || reads != wantReads {
			t.Errorf("%s: deleted %v, next release in %v, pod lists %d; want deleted %v, in %v, %d lists",
				what, gone, s.releaseAfter, reads, wantGone, wantWait, wantReads)
		}
	}
	step("first planned", 0, ReleaseGrace, false, 0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "virt-launcher-v-late",
		Labels: map[string]string{vmv1.LabelLauncherVMName: "v"}, Annotations: annotated(t, entryFor("corp", ip.Name))}}
	if err := c.Create(ctx, pod); err != nil { // created from a copy taken before the removal
		t.Fatal(err)
	}
	step("half the grace", ReleaseGrace/2, ReleaseGrace/2, false, 0)
	step("due, but a late pod names it", ReleaseGrace/2, ReleaseGrace, false, 1)
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	step("just before the new wait ends", ReleaseGrace-time.Millisecond, time.Millisecond, false, 1)
	step("after the grace", time.Millisecond, 0, true, 2)
	if len(r.releases.since) != 0 {
		t.Errorf("released, yet recorded: %v", r.releases.since)
	}
}

// TestReleasesKeepOnlyWhatStillWaits: a VM's record holds only the IPAddresses that are
// unnamed and not yet due; one that is named again, or no longer a candidate, is dropped, and
// forget drops the VM.
func TestReleasesKeepOnlyWhatStillWaits(t *testing.T) {
	var r releases
	vm := types.NamespacedName{Namespace: "ns", Name: "v"}
	t0 := time.Now()
	if due, wait := r.due(vm, []types.UID{"a", "b"}, t0, time.Second); len(due) != 0 || wait != time.Second {
		t.Fatalf("first sight: due %v, wait %v", due, wait)
	}
	if due, wait := r.due(vm, []types.UID{"b"}, t0.Add(time.Second/2), time.Second); len(due) != 0 || wait != time.Second/2 {
		t.Fatalf("b half-way: due %v, wait %v", due, wait)
	}
	if due, wait := r.due(vm, []types.UID{"a", "b"}, t0.Add(time.Second), time.Second); len(due) != 1 || due[0] != "b" || wait != time.Second {
		t.Errorf("a starts over, b due: due %v, wait %v", due, wait)
	}
	r.forget(vm)
	if len(r.since) != 0 {
		t.Errorf("forgotten, yet recorded: %v", r.since)
	}
}

// TestAReleaseUnderWayBringsTheVMBack: Reconcile's result brings the VM back when its next
// ReleaseGrace ends, unless it comes back sooner anyway; nothing waiting adds no requeue.
func TestAReleaseUnderWayBringsTheVMBack(t *testing.T) {
	for _, c := range []struct {
		release, res, want time.Duration
	}{
		{0, 0, 0},
		{ReleaseGrace, 0, ReleaseGrace},
		{ReleaseGrace, time.Second, time.Second},
		{time.Second, time.Minute, time.Second},
	} {
		got := untilRelease(&scope{releaseAfter: c.release}, reconcile.Result{RequeueAfter: c.res})
		if got.RequeueAfter != c.want {
			t.Errorf("release in %v, result %v: requeue after %v, want %v", c.release, c.res, got.RequeueAfter, c.want)
		}
	}
}
