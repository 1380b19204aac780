package vm

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

func vmAt(rv string, mutate ...func(*vmv1.VirtualMachine)) *vmv1.VirtualMachine {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", ResourceVersion: rv}}
	for _, m := range mutate {
		m(vm)
	}
	return vm
}

func TestOwnPatchesAreToldApartFromOtherWriters(t *testing.T) {
	annotated := func(vm *vmv1.VirtualMachine) {
		vm.Annotations = map[string]string{sdnv1.AnnotationNetworksSpec: "[]"}
	}
	relabelled := func(vm *vmv1.VirtualMachine) { vm.Labels = map[string]string{"team": "b"} }
	now := time.Unix(1000, 0)
	for _, tt := range []struct {
		name   string
		record func(o *ownWrites)
		old    *vmv1.VirtualMachine
		new    *vmv1.VirtualMachine
		want   bool
	}{
		{name: "the networks-spec patch, nothing else", want: true, old: vmAt("1"), new: vmAt("2", annotated),
			record: func(o *ownWrites) {
				o.expectPatched(vmAt("1"), vmAt("2", annotated), onlyOurChange(vmAt("1"), vmAt("2", annotated)))
			}},
		{name: "the patch answered with another writer's label in it", want: false, old: vmAt("1"), new: vmAt("2", annotated, relabelled),
			record: func(o *ownWrites) {
				o.expectPatched(vmAt("1"), vmAt("2", annotated, relabelled), onlyOurChange(vmAt("1"), vmAt("2", annotated, relabelled)))
			}},
		{name: "two own patches delivered as one update", want: true, old: vmAt("1"), new: vmAt("3"),
			record: func(o *ownWrites) {
				o.expectPatched(vmAt("1"), vmAt("2"), true)
				o.expectPatched(vmAt("2"), vmAt("3"), true)
			}},
		{name: "another writer's update after an own patch", want: false, old: vmAt("2"), new: vmAt("4"),
			record: func(o *ownWrites) { o.expectPatched(vmAt("1"), vmAt("2"), true) }},
		{name: "an update from a version vmipam did not patch", want: false, old: vmAt("0"), new: vmAt("2"),
			record: func(o *ownWrites) { o.expectPatched(vmAt("1"), vmAt("2"), true) }},
		{name: "nothing recorded", want: false, old: vmAt("1"), new: vmAt("2"), record: func(*ownWrites) {}},
		{name: "an expectation past its TTL", want: false, old: vmAt("1"), new: vmAt("2"),
			record: func(o *ownWrites) {
				o.expectPatched(vmAt("1"), vmAt("2"), true)
				now = now.Add(ExpectationTTL + time.Second)
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now = time.Unix(1000, 0)
			o := newOwnWrites(func() time.Time { return now })
			tt.record(o)
			if got := o.ownPatch(tt.old, tt.new); got != tt.want {
				t.Errorf("ownPatch = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestCreatedIPAddressIsReadUntilTheCacheShowsIt(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).Build()
	r := expectingReader{Reader: c, own: own}
	key := types.NamespacedName{Namespace: "ns", Name: "web-corp"}
	created := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-corp", UID: "ip-uid", ResourceVersion: "5"}}
	own.expectCreated(created)

	got := &sdnv1.IPAddress{}
	if err := r.Get(context.Background(), key, got); err != nil || got.UID != "ip-uid" {
		t.Fatalf("before the cache shows it: got %v, %v; want the created IPAddress", got.UID, err)
	}
	if !own.observedIPAddress(created) {
		t.Error("the creation event of the object as created is vmipam's own")
	}
	if err := r.Get(context.Background(), key, &sdnv1.IPAddress{}); !apierrors.IsNotFound(err) {
		t.Errorf("once observed (and gone from the cache), got %v, want NotFound", err)
	}

	own.expectCreated(created)
	now = now.Add(ExpectationTTL + time.Second)
	if err := r.Get(context.Background(), key, &sdnv1.IPAddress{}); !apierrors.IsNotFound(err) {
		t.Errorf("past ExpectationTTL, got %v, want NotFound", err)
	}
	allocated := created.DeepCopy()
	allocated.ResourceVersion = "6"
	own.expectCreated(created)
	if own.observedIPAddress(allocated) {
		t.Error("a later version (SDN's answer) is news to the VM")
	}
}

func TestChangedIgnoresWhatVMIPAMDoesNotRead(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1",
		Labels: map[string]string{vmv1.LabelLauncherVMName: "web"}, Annotations: map[string]string{}}}
	answered := pod.DeepCopy()
	answered.ResourceVersion, answered.Annotations[sdnv1.AnnotationNetworksStatus] = "2", "[]"
	respec := pod.DeepCopy()
	respec.ResourceVersion, respec.Annotations[sdnv1.AnnotationNetworksSpec] = "3", "[]"
	running := pod.DeepCopy()
	running.ResourceVersion, running.Status.Phase = "4", corev1.PodRunning
	vm := vmAt("1")
	sameVM := vmAt("2")
	phase := vmAt("3", func(v *vmv1.VirtualMachine) { v.Status.Phase = vmv1.PhaseRunning })
	for _, tt := range []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{"SDN's networks-status on a pod", pod, answered, false},
		{"a pod's networks-spec", pod, respec, true},
		{"a pod's phase", pod, running, true},
		{"a VM whose trimmed fields changed only", vm, sameVM, false},
		{"a VM's phase", vm, phase, true},
	} {
		if got := changed(tt.old, tt.new); got != tt.want {
			t.Errorf("%s: changed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReaderShowsOwnPatchUntilTheCacheCatchesUp(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	stale := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "1",
		Labels: map[string]string{vmv1.LabelLauncherVMName: "web"}}}
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(stale).Build()
	r := expectingReader{Reader: c, own: own}
	cached := &corev1.PodList{}
	if err := c.List(context.Background(), cached); err != nil || len(cached.Items) != 1 {
		t.Fatal(err)
	}
	written := cached.Items[0].DeepCopy()
	written.ResourceVersion, written.Annotations = "7", map[string]string{sdnv1.AnnotationNetworksSpec: "[]"}
	own.expectPatched(&cached.Items[0], written, true)

	list := &corev1.PodList{}
	if err := r.List(context.Background(), list); err != nil || list.Items[0].Annotations[sdnv1.AnnotationNetworksSpec] != "[]" {
		t.Errorf("while the cache shows the version before vmipam's patch, the patched pod is read; got %+v, %v", list.Items, err)
	}
	own.expectPatched(written, written, false) // another writer's change came with a later write
	list = &corev1.PodList{}
	if err := r.List(context.Background(), list); err != nil || list.Items[0].Annotations[sdnv1.AnnotationNetworksSpec] != "" {
		t.Errorf("without a verified own patch, the cache's pod is read; got %+v, %v", list.Items, err)
	}
}

// The watch may deliver a write's event before the write's answer: the verdict on it waits for
// the answer, so vmipam's own write brings nothing and another writer's still brings the VM.
func TestEventDuringAWriteIsJudgedAfterItsAnswer(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	observed := vmAt("1")
	written := vmAt("2", func(v *vmv1.VirtualMachine) {
		v.Annotations = map[string]string{sdnv1.AnnotationNetworksSpec: "[]"}
	})
	echo := func() bool { return !own.ownPatch(observed, written) && !own.echoOfSpecWrite(observed, written) }

	k := own.begin(written)
	if own.judge(k, echo) {
		t.Fatal("an event during the write was judged before the write's answer")
	}
	own.expectPatched(observed, written, onlyOurChange(observed, written))
	own.wroteNetworksSpec(written)
	if own.done(k) {
		t.Error("the echo of vmipam's own write was news")
	}

	relabelled := vmAt("3", func(v *vmv1.VirtualMachine) { v.Labels = map[string]string{"team": "a"} })
	k = own.begin(written)
	own.judge(k, func() bool { return !own.ownPatch(written, relabelled) && !own.echoOfSpecWrite(written, relabelled) })
	if !own.done(k) {
		t.Error("another writer's change that arrived during vmipam's write was dropped")
	}
	if !own.judge(k, func() bool { return true }) {
		t.Error("with no write in flight an event is judged at once")
	}
}

// A networks-spec write whose event never comes (the object was deleted) is not kept forever.
func TestSpecWritesWithoutTheirEventAreSwept(t *testing.T) {
	now := time.Unix(1000, 0)
	own := newOwnWrites(func() time.Time { return now })
	own.wroteNetworksSpec(vmAt("2"))
	now = now.Add(2 * ExpectationTTL)
	other := vmAt("7")
	other.Name = "db"
	own.wroteNetworksSpec(other)
	if n := len(own.specWrites); n != 1 {
		t.Errorf("%d networks-spec writes kept, want only the recent one", n)
	}
}

// The cache keeps of a launcher pod only what vmipam reads (controller.slimLauncherPod), while
// a patch returns the whole pod: vmipam's own networks-spec patch is recognised all the same,
// and a change of what it reads is not taken for its own.
func TestOnlyOurChangeComparesWhatVMIPAMReadsOfAPod(t *testing.T) {
	cached := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-p", ResourceVersion: "1",
		Labels: map[string]string{vmv1.LabelLauncherVMName: "web"}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	full := func(change func(*corev1.Pod)) *corev1.Pod {
		p := cached.DeepCopy()
		p.ResourceVersion, p.GenerateName = "2", "virt-launcher-web-"
		p.Labels["kubevirt.internal.virtualization.deckhouse.io"] = "web"
		p.Annotations = map[string]string{sdnv1.AnnotationNetworksSpec: "[]", sdnv1.AnnotationNetworksStatus: "[]",
			"kubectl.kubernetes.io/default-container": "compute"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "InternalVirtualizationVirtualMachineInstance", Name: "web", UID: "uid-vmi"}}
		p.Finalizers = []string{"virtualization.deckhouse.io/protection"}
		if change != nil {
			change(p)
		}
		return p
	}
	now := metav1.Now()
	for _, tt := range []struct {
		name    string
		written *corev1.Pod
		want    bool
	}{
		{"our patch only, the pod carrying what the cache drops", full(nil), true},
		{"the VM label changed", full(func(p *corev1.Pod) { p.Labels[vmv1.LabelLauncherVMName] = "db" }), false},
		{"the pod finished", full(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"the pod is being deleted", full(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false},
		{"another pod of the name", full(func(p *corev1.Pod) { p.UID = "uid-q" }), false},
	} {
		if got := onlyOurChange(cached, tt.written); got != tt.want {
			t.Errorf("%s: onlyOurChange = %v, want %v", tt.name, got, tt.want)
		}
	}
}
