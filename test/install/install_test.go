package install

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/vmipam/vmipam/controller"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/plan"
	vmctrl "github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/deploy"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/build"
	testcrds "github.com/vmipam/vmipam/test/crds"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

const (
	release   = "vmipam"
	namespace = "vmipam-system"
	// timeout bounds each wait; the leader's lease is 15 s.
	timeout = 60 * time.Second
)

// TestInstall installs the chart as `helm template | kubectl apply --server-side` would and
// checks what an admin would after installing: policies are validated, VMs of every mode get
// their interfaces, both replicas are Ready, the standby takes over from a killed leader,
// the controller is never refused by RBAC, and its ServiceAccount can do nothing else.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and builds the controller")
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(timeout)
	g.SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	binary := buildController(t)
	third, err := testcrds.ThirdParty()
	g.Expect(err).NotTo(HaveOccurred())
	standIn, err := testcrds.StandIn()
	g.Expect(err).NotTo(HaveOccurred())
	third = append(third, standIn...)
	// The chart brings our CRD. OwnerReferencesPermissionEnforcement (on in some
	// distributions) checks that the controller may set blockOwnerDeletion on the VM.
	e, err := env.Start(env.Options{CRDs: third, ControllerManager: true,
		APIServerFlags: map[string]string{"enable-admission-plugins": "OwnerReferencesPermissionEnforcement"}})
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
	})
	g.Expect(err).NotTo(HaveOccurred())
	scheme, err := controller.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	g.Expect(dryrunv1.AddToScheme(scheme)).To(Succeed())
	admin, err := client.New(e.Config, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// Render and apply.
	first, second := freePorts(t), freePorts(t)
	objs, err := deploy.Objects(release, namespace, map[string]any{"ports": first.values(),
		"apiService": map[string]any{"enabled": true}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(admin.Create(ctx, build.Namespace(namespace))).To(Succeed())
	apply(ctx, t, admin, objs)
	args := deploymentArgs(t, objs)
	// The chart's default worker count is the binary's (docs/SCALING.md measured it).
	g.Expect(args).To(ContainElement(fmt.Sprintf("--max-concurrent-reconciles=%d", vmctrl.DefaultMaxConcurrentReconciles)))

	// The stand-ins for SDN (the admin) and the virtualization controller (as VC's
	// ServiceAccount, which the chart names in records.consumers and binds to the record
	// consumer's role).
	startStandIns(ctx, t, e, scheme, admin)

	// The controller, as the chart's ServiceAccount.
	saConfig, kubeconfig, err := e.ServiceAccount(ctx, namespace, release)
	g.Expect(err).NotTo(HaveOccurred())
	var replicas []*replica
	var mu sync.Mutex
	certDirs := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var dirs []string
		for _, r := range replicas {
			dirs = append(dirs, r.certDir)
		}
		return dirs
	}
	go mountSecret(ctx, admin, client.ObjectKey{Namespace: namespace, Name: release + "-serving-cert"}, certDirs)
	start := func(name string, p ports) *replica {
		r := startReplica(t, binary, e.Dir, name, args, p, kubeconfig)
		mu.Lock()
		replicas = append(replicas, r)
		mu.Unlock()
		return r
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range replicas {
				t.Logf("--- %s log ---\n%s", r.name, r.output())
			}
		}
	})
	leader := start("replica-0", first)
	g.Eventually(leader.ready).Should(BeTrue(), "replica-0 Ready")

	t.Run("the webhook refuses a broken policy", func(t *testing.T) {
		g := NewWithT(t)
		broken := &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "broken"},
			Spec: v1alpha1.ClusterIPAMPolicySpec{Allocation: &v1alpha1.Expression{Expression: "vm.nosuchfield"}}}
		// The webhook's failurePolicy is Ignore: until the CA is injected and the API server
		// trusts the certificate, a broken policy would be admitted; retry until refused.
		g.Eventually(func() error {
			err := admin.Create(ctx, broken.DeepCopy())
			if err == nil {
				_ = admin.Delete(ctx, broken.DeepCopy())
				return fmt.Errorf("admitted")
			}
			return err
		}, timeout).Should(MatchError(ContainSubstring("denied the request")))
	})

	vmNS := "vms"
	t.Run("Auto, Static and L2-only VMs converge", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(admin.Create(ctx, build.Namespace(vmNS))).To(Succeed())
		for _, o := range []client.Object{
			build.ClusterPool("corp-pool", "10.10.0.0/24"), build.ClusterNetwork("corp", "corp-pool"),
			build.ClusterNetwork("l2", ""),
			build.StaticIPAddress(vmNS, "static-ip", sdnv1.KindClusterNetwork, "corp", "10.10.0.200"),
			build.VM(vmNS, "auto", build.OnClusterNetwork("corp", "")),
			build.VM(vmNS, "static", build.OnClusterNetwork("corp", "static-ip")),
			build.VM(vmNS, "l2", build.OnClusterNetwork("l2", "")),
		} {
			g.Expect(admin.Create(ctx, o)).To(Succeed(), "create %T %s", o, o.GetName())
		}
		for _, vm := range []string{"auto", "static", "l2"} {
			g.Eventually(readyOf(ctx, admin, vmNS, vm), timeout).Should(HavePrefix("True/"), "VM %s", vm)
		}
		g.Expect(statusAddress(ctx, admin, vmNS, "static")).To(Equal("10.10.0.200"))
		g.Expect(statusAddress(ctx, admin, vmNS, "auto")).To(HavePrefix("10.10.0."))
	})

	t.Run("an Evaluation through the APIService answers", func(t *testing.T) {
		g := NewWithT(t)
		// The APIService turns Available once the CA is injected and the server answers.
		var ev *dryrunv1.Evaluation
		g.Eventually(func() error {
			ev = &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: vmNS},
				Spec: dryrunv1.EvaluationSpec{VirtualMachineName: "auto"}}
			return admin.Create(ctx, ev)
		}, timeout).Should(Succeed())
		g.Expect(ev.Status.VM.Exists).To(BeTrue(), "the evaluated VM exists")
		g.Expect(ev.Status.Interfaces).NotTo(BeEmpty())
		g.Expect(ev.Status.Interfaces[0].Decision.Allocation).To(BeEquivalentTo("Auto"))
	})

	t.Run("a second replica starts Ready", func(t *testing.T) {
		standby := start("replica-1", second)
		g := NewWithT(t)
		// Every replica keeps the installed policies compiled (a read-only watcher), so a
		// standby is Ready — webhook, dry-run API and all — while another replica leads.
		g.Eventually(func() bool { return standby.ready() }, timeout).Should(BeTrue(), "replica-1 Ready while replica-0 leads")
	})

	t.Run("the standby takes over from a killed leader", func(t *testing.T) {
		g := NewWithT(t)
		before := leaseHolder(ctx, g, admin)
		leader.kill()
		g.Eventually(func() string { return leaseHolder(ctx, g, admin) }, timeout).ShouldNot(Equal(before))
		g.Expect(admin.Create(ctx, build.VM(vmNS, "after-failover", build.OnClusterNetwork("corp", "")))).To(Succeed())
		g.Eventually(readyOf(ctx, admin, vmNS, "after-failover"), timeout).Should(HavePrefix("True/"))
	})

	t.Run("the ServiceAccount may change nothing else", func(t *testing.T) {
		sa, err := client.New(saConfig, client.Options{Scheme: scheme})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		refusedByPolicy(ctx, t, admin, sa, vmNS)
	})

	t.Run("no request of the controller was forbidden", func(t *testing.T) {
		for _, r := range replicas {
			if i := strings.Index(strings.ToLower(r.output()), "forbidden"); i >= 0 {
				t.Errorf("%s logged %q", r.name, excerpt(r.output(), i))
			}
		}
	})
}

// buildController compiles cmd/ipam-controller.
func buildController(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ipam-controller")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/vmipam/vmipam/cmd/ipam-controller").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// apply server-side applies every rendered object, in the chart's order, after replacing
// each Service by an ExternalName Service to localhost: there is no kube-proxy here, and the
// API server resolves an ExternalName Service to https://<externalName>:<port> for webhooks
// and APIServices alike (../shared/notes/local-services.md).
func apply(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		obj := u.DeepCopy()
		if obj.GetKind() == "Service" {
			toExternalName(t, obj)
		}
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("install-test"), client.ForceOwnership)
		if err != nil {
			t.Fatalf("applying %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			waitEstablished(ctx, t, c, obj.GetName())
		}
	}
}

// toExternalName makes u, a Service, env.LocalService's ExternalName Service to localhost.
func toExternalName(t *testing.T, u *unstructured.Unstructured) {
	t.Helper()
	svc := &corev1.Service{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, svc); err != nil {
		t.Fatal(err)
	}
	env.LocalService(svc)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(svc)
	if err != nil {
		t.Fatal(err)
	}
	u.Object = obj
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established: %v", crd.Status.Conditions)
	}, timeout).Should(Succeed(), "CRD %s established", name)
}

// deploymentArgs returns the controller container's args of the rendered Deployment.
func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	t.Fatal("the chart rendered no Deployment")
	return nil
}

// startStandIns runs the SDN stand-in as the admin and the virtualization-controller stand-in
// as VC's ServiceAccount (virtualization.Identity), in this process.
func startStandIns(ctx context.Context, t *testing.T, e *env.Environment, scheme *runtime.Scheme, admin client.Client) {
	t.Helper()
	log, err := os.Create(filepath.Join(e.Dir, "stand-ins.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(log)))
	for _, o := range virtualization.Identity() {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatalf("stand-in identity %T %s: %v", o, o.GetName(), err)
		}
	}
	vcConfig, _, err := e.ServiceAccount(ctx, virtualization.ServiceAccountNamespace, virtualization.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	runManager(ctx, t, e.Config, scheme, func(mgr ctrl.Manager) error { return sdn.New(nil).SetupWithManager(mgr) })
	runManager(ctx, t, vcConfig, scheme, func(mgr ctrl.Manager) error { return virtualization.New(nil).SetupWithManager(mgr) })
}

// runManager runs a manager authenticated by cfg with setup until the test ends.
func runManager(ctx context.Context, t *testing.T, cfg *rest.Config, scheme *runtime.Scheme, setup func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("stand-in: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// readyOf polls a VM's NetworkReady as "Status/Reason: message".
func readyOf(ctx context.Context, c client.Reader, ns, name string) func() string {
	return func() string {
		vm := &vmv1.VirtualMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
			return err.Error()
		}
		cond := meta.FindStatusCondition(vm.Status.Conditions, consumer.ConditionNetworkReady)
		if cond == nil {
			return "no NetworkReady"
		}
		return fmt.Sprintf("%s/%s: %s", cond.Status, cond.Reason, cond.Message)
	}
}

// statusAddress is the address in status.networks of the VM's first additional interface.
func statusAddress(ctx context.Context, c client.Reader, ns, name string) string {
	vm := &vmv1.VirtualMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		return err.Error()
	}
	for _, n := range vm.Status.Networks {
		if n.Type != vmv1.NetworkTypeMain {
			return n.IPAddress
		}
	}
	return ""
}

// leaseHolder is the holder of the leader lease the chart's args name.
func leaseHolder(ctx context.Context, g Gomega, c client.Reader) string {
	lease := &coordinationv1.Lease{}
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: namespace,
		Name: "vmipam-controller.ipam.virtualization.deckhouse.io"}, lease)).To(Succeed())
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

// excerpt is the log around index i.
func excerpt(log string, i int) string {
	from, to := max(0, i-200), min(len(log), i+200)
	return log[from:to]
}

// refusedByPolicy checks that the ServiceAccount may write nothing of what other controllers
// own — RBAC grants it no verb on pods, VMs, VM status or record status — and that the
// ValidatingAdmissionPolicy refuses it every IPAddress write but those of its Auto IPAddresses,
// which RBAC cannot narrow.
func refusedByPolicy(ctx context.Context, t *testing.T, admin, sa client.Client, ns string) {
	g := NewWithT(t)
	pods := &corev1.PodList{}
	g.Expect(admin.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty(), "launcher pods")
	pod := &pods.Items[0]
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto"}}
	mergePatch := func(obj client.Object, patch string) error {
		return sa.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
	byRBAC := map[string]func() error{
		"annotate a pod with networks-spec": func() error {
			return mergePatch(pod.DeepCopy(), `{"metadata":{"annotations":{"network.deckhouse.io/networks-spec":"[]"}}}`)
		},
		"annotate a VM with networks-spec": func() error {
			return mergePatch(vm.DeepCopy(), `{"metadata":{"annotations":{"network.deckhouse.io/networks-spec":"[]"}}}`)
		},
		"write a VM's status": func() error {
			return sa.Status().Patch(ctx, vm.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Stopped"}}`)))
		},
		"write a record's status": func() error {
			rec := &ipamv1.VirtualMachineIPAM{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "auto"}}
			return sa.Status().Patch(ctx, rec, client.RawPatch(types.MergePatchType, []byte(`{"status":{"observedGeneration":99}}`)))
		},
	}
	for name, try := range byRBAC {
		t.Run(name, func(t *testing.T) {
			if err := try(); !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "cannot") {
				t.Errorf("got %v, want RBAC's refusal", err)
			}
		})
	}
	cases := map[string]func() error{
		"create a Static IPAddress": func() error {
			return sa.Create(ctx, build.StaticIPAddress(ns, "stolen", sdnv1.KindClusterNetwork, "corp", "10.10.0.201"))
		},
		"create an Auto IPAddress without a VM owner": func() error {
			ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan",
				Annotations: map[string]string{plan.AnnotationInterface: "ClusterNetwork/corp"}},
				Spec: sdnv1.IPAddressSpec{Type: sdnv1.IPAddressTypeAuto,
					NetworkRef: sdnv1.IPAddressNetworkRef{Kind: sdnv1.KindClusterNetwork, Name: "corp"}}}
			return sa.Create(ctx, ip)
		},
		"delete the user's Static IPAddress": func() error {
			return sa.Delete(ctx, &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "static-ip"}})
		},
	}
	for name, try := range cases {
		t.Run(name, func(t *testing.T) {
			err := try()
			if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) || !strings.Contains(fmt.Sprint(err), "ValidatingAdmissionPolicy") {
				t.Errorf("got %v, want a refusal by the ValidatingAdmissionPolicy", err)
			}
		})
	}
}
