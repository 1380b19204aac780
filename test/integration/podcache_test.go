package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/index/cacheindex"
	"github.com/vmipam/vmipam/controller/reads"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// vmipam's own cache (reads.NewCache) watches launcher pods as metadata, unfinished ones only,
// and answers typed reads from it: a real kube-apiserver's metadata-only watch and its pod
// field selector on status.phase are what this relies on.
var _ = Describe("The controller's pod cache", func() {
	It("holds unfinished launcher pods as metadata, answers typed reads and indexed lookups, and lets a pod go when it finishes (TestPodCacheHoldsUnfinishedPodsAsMetadata)", func() {
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		ns := newNamespace(ctx)
		spec := `[{"type":"Network","name":"lan","ipAddressNames":["lan-static"]}]`
		running, other := launcher(ns, "vm-a", spec), launcher(ns, "vm-b", "")
		create(ctx, running, other)

		opts := reads.CacheOptions()
		opts.Scheme = scheme
		c, err := reads.NewCache(testEnv.Config, opts)
		Expect(err).NotTo(HaveOccurred())
		Expect(index.Setup(ctx, cacheindex.Indexer{Cache: c})).To(Succeed())
		informer, err := c.GetInformer(ctx, &corev1.Pod{})
		Expect(err).NotTo(HaveOccurred())
		deleted := make(chan string, 4)
		_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) {
			if tombstone, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tombstone.Obj
			}
			if m, ok := o.(*metav1.PartialObjectMetadata); ok && m.Namespace == ns {
				select { // the suite's other pods come and go too: never block the informer
				case deleted <- m.Name:
				default:
				}
			}
		}})
		Expect(err).NotTo(HaveOccurred())
		go func() { _ = c.Start(ctx) }()
		Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

		By("a List of pods by index answers from the metadata: the annotations vmipam reads, no others")
		var launchers []corev1.Pod
		Eventually(func() []corev1.Pod {
			var err error
			launchers, err = index.LauncherPods(ctx, c, ns, "vm-a")
			Expect(err).NotTo(HaveOccurred())
			return launchers
		}, timeout, interval).Should(HaveLen(1))
		got := launchers[0]
		Expect(got.Kind).To(Equal("Pod"))
		Expect(got.Name).To(Equal(running.Name))
		Expect(got.Annotations).To(Equal(map[string]string{sdnv1.AnnotationNetworksSpec: spec}), "only what vmipam reads")
		Expect(got.Labels).To(Equal(map[string]string{vmv1.LabelLauncherVMName: "vm-a"}))
		Expect(got.Spec.Containers).To(BeEmpty(), "no spec is cached")
		var pods corev1.PodList
		Expect(c.List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{index.CarriedIPAddress: "lan-static"})).To(Succeed())
		Expect(pods.Items).To(ConsistOf(HaveField("Name", running.Name)))

		By("the informer behind corev1.Pod is the metadata one: its store holds no typed pod")
		for _, o := range informer.(toolscache.SharedIndexInformer).GetStore().List() {
			Expect(o).To(BeAssignableToTypeOf(&metav1.PartialObjectMetadata{}))
		}

		By("a pod that finishes leaves the cache as a deleted one does")
		other.Status.Phase = corev1.PodSucceeded
		Expect(k8s.Status().Update(ctx, other)).To(Succeed())
		Eventually(deleted, timeout, interval).Should(Receive(Equal(other.Name)))
		Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Pod{}))).To(BeTrue(),
			"a finished pod is not in the cache")
		var one corev1.Pod
		Expect(c.Get(ctx, client.ObjectKeyFromObject(running), &one)).To(Succeed())
		Expect(one.UID).To(Equal(running.UID))
	})
})

// launcher returns a launcher pod of VM vm in ns carrying networks-spec spec (none when
// empty) and an annotation vmipam does not read.
func launcher(ns, vm, spec string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "virt-launcher-" + vm + "-",
		Labels:      map[string]string{vmv1.LabelLauncherVMName: vm, "kubevirt.io": "virt-launcher"},
		Annotations: map[string]string{"example.com/other": "not read"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "compute", Image: "virt-launcher"}}}}
	if spec != "" {
		p.Annotations[sdnv1.AnnotationNetworksSpec] = spec
	}
	return p
}
