package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/dryrun/apiserver"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/crds/rbac"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/internal/manifest"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/dryrunserver"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// harness is a control plane with vmipam (production wiring, dry-run API server included,
// registered with the API server) and the stand-ins, and a client of a ServiceAccount that
// has only the shipped evaluator role, bound cluster-wide.
type harness struct {
	k8s      client.Client
	scheme   *runtime.Scheme
	compiler *evaluator.Compiler
	srv      *apiserver.Server
	caller   client.Client
}

func startHarness(t *testing.T) *harness {
	t.Helper()
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	e := env.StartForTest(t, env.Options{})
	h := &harness{}
	var err error
	if h.scheme, err = controller.NewScheme(); err != nil {
		t.Fatal(err)
	}
	if h.k8s, err = client.New(e.Config, client.Options{Scheme: h.scheme}); err != nil {
		t.Fatal(err)
	}
	if h.compiler, err = evaluator.NewCompiler(evaluator.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	route := h.startManager(t, e)
	h.caller = h.newCaller(t, e)
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, convergeTimeout, true,
		func(context.Context) (bool, error) { return h.srv.ReadyCheck(nil) == nil, nil }); err != nil {
		t.Fatalf("dry-run API server not ready: %v", err)
	}
	if err := route(t.Context()); err != nil {
		t.Fatal(err)
	}
	return h
}

// startManager runs vmipam with its dry-run API server and the stand-ins on one manager, and
// returns the step that registers the server with the API server.
func (h *harness) startManager(t *testing.T, e *env.Environment) func(context.Context) error {
	t.Helper()
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: h.scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	registry, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	served, err := dryrunserver.New(e)
	if err != nil {
		t.Fatal(err)
	}
	opts, port, err := served.Options(ctx, h.k8s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.srv, err = controller.SetupDryRun(mgr, registry, opts); err != nil {
		t.Fatal(err)
	}
	if err := sdn.New(nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := virtualization.New(nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return func(ctx context.Context) error { return served.Route(ctx, h.k8s, port) }
}

// newCaller creates a ServiceAccount allowed (by the shipped evaluator ClusterRole, bound
// cluster-wide) to dry-run VMs and to read what an evaluation reads — the VMs, their
// namespaces and launcher pods, the SDN objects: an answer never carries what the caller could
// not read — and returns a client authenticating with a token for it.
func (h *harness) newCaller(t *testing.T, e *env.Environment) client.Client {
	t.Helper()
	ctx := t.Context()
	roles, err := rbac.ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "golden-callers"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "golden-callers", Name: "golden"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "golden-dryrun"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.ClusterRoleEvaluator},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "golden-callers", Name: "golden"}}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "golden-vm-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"virtualization.deckhouse.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{""}, Resources: []string{"namespaces", "pods"}, Verbs: []string{"get", "list"}},
				{APIGroups: []string{"network.deckhouse.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
				// the trace (its input) is shown only to readers of the installed policies
				{APIGroups: []string{"ipam.virtualization.deckhouse.io"}, Resources: []string{"clusteripampolicies", "virtualmachineipams"}, Verbs: []string{"get", "list"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "golden-vm-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "golden-vm-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "golden-callers", Name: "golden"}}}}
	for _, r := range roles {
		objs = append(objs, r)
	}
	for _, o := range objs {
		if err := h.k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("golden-callers").CreateToken(ctx, "golden",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	s := runtime.NewScheme()
	if err := dryrunv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setUp creates the case's namespace, world and policies, and waits for the policies to serve.
func (h *harness) setUp(t *testing.T, ctx context.Context, dir, ns string) {
	t.Helper()
	if err := h.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	h.createAll(t, ctx, filepath.Join(dir, "world.yaml"), ns)
	if _, err := os.Stat(filepath.Join(dir, "policy.yaml")); err != nil {
		return
	}
	for _, p := range h.createAll(t, ctx, filepath.Join(dir, "policy.yaml"), ns) {
		t.Cleanup(func() { _ = h.k8s.Delete(context.Background(), p) })
		h.waitPolicyReady(t, ctx, p.GetName())
	}
}

func (h *harness) waitPolicyReady(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		p := &v1alpha1.ClusterIPAMPolicy{}
		if err := h.k8s.Get(ctx, client.ObjectKey{Name: name}, p); err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) && p.Status.ObservedGeneration == p.Generation, nil
	})
	if err != nil {
		t.Fatalf("policy %s not Ready: %v", name, err)
	}
}

// subject creates the case's VMs in order, each once the previous one has been reconciled,
// and returns the last one's name.
func (h *harness) subject(t *testing.T, ctx context.Context, dir, ns string) string {
	t.Helper()
	vms := h.createAll(t, ctx, filepath.Join(dir, "vm.yaml"), ns, h.waitReconciled)
	if len(vms) == 0 {
		t.Fatalf("%s/vm.yaml has no VirtualMachine", dir)
	}
	return vms[len(vms)-1].GetName()
}

// waitReconciled waits until the VM has a NetworkReady condition for its generation.
func (h *harness) waitReconciled(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		vm := &vmv1.VirtualMachine{}
		if err := h.k8s.Get(ctx, client.ObjectKeyFromObject(obj), vm); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(vm.Status.Conditions, consumer.ConditionNetworkReady)
		return c != nil && c.ObservedGeneration == vm.Generation, nil
	})
	if err != nil {
		t.Fatalf("%s not reconciled: %v", obj.GetName(), err)
	}
}

// createAll creates every object of a YAML file, namespaced ones in ns, calling after (if
// given) once each is created; it returns them.
func (h *harness) createAll(t *testing.T, ctx context.Context, file, ns string,
	after ...func(*testing.T, context.Context, client.Object)) []client.Object {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := manifest.Split(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []client.Object
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(doc.JSON, &u.Object); err != nil {
			t.Fatalf("%s: document %d: %v", file, doc.Index, err)
		}
		if namespaced, err := apiutil.IsObjectNamespaced(u, h.scheme, h.k8s.RESTMapper()); err != nil {
			t.Fatal(err)
		} else if namespaced {
			u.SetNamespace(ns)
		}
		if err := h.k8s.Create(ctx, u); err != nil {
			t.Fatalf("%s: create %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
		for _, f := range after {
			f(t, ctx, u)
		}
		out = append(out, u)
	}
	return out
}

// ask creates an Evaluation of the live VM through the API server, as the caller.
func (h *harness) ask(ctx context.Context, vm *vmv1.VirtualMachine) (*dryrunv1.EvaluationStatus, error) {
	vm = vm.DeepCopy()
	vm.APIVersion, vm.Kind, vm.ManagedFields = vmv1.GroupVersion.String(), "VirtualMachine", nil
	raw, err := json.Marshal(vm)
	if err != nil {
		return nil, err
	}
	ev := &dryrunv1.Evaluation{ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace},
		Spec: dryrunv1.EvaluationSpec{VM: &runtime.RawExtension{Raw: raw}}}
	if err := h.caller.Create(ctx, ev); err != nil {
		return nil, fmt.Errorf("dry run: %w", err)
	}
	return &ev.Status, nil
}

// launcherPods returns the VM's launcher pods.
func (h *harness) launcherPods(t *testing.T, ctx context.Context, ns, vm string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := h.k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{vmv1.LabelLauncherVMName: vm}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// world reads everything the controller reads about the case's VMs, as the API server has
// it: the namespace's VMs, IPAddresses, networks, pools and launcher pods, the Namespace, and
// the case's cluster-scoped networks and pools (named after the namespace).
func (h *harness) world(t *testing.T, ctx context.Context, ns string) []client.Object {
	t.Helper()
	var objs []client.Object
	for _, list := range []client.ObjectList{&vmv1.VirtualMachineList{}, &sdnv1.IPAddressList{}, &sdnv1.NetworkList{},
		&sdnv1.IPAddressPoolList{}, &corev1.PodList{}, &ipamv1.VirtualMachineIPAMList{}} {
		if err := h.k8s.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, items(t, list)...)
	}
	for _, list := range []client.ObjectList{&sdnv1.ClusterNetworkList{}, &sdnv1.ClusterIPAddressPoolList{}} {
		if err := h.k8s.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, o := range items(t, list) {
			if strings.HasPrefix(o.GetName(), ns+"-") {
				objs = append(objs, o)
			}
		}
	}
	namespace := &corev1.Namespace{}
	if err := h.k8s.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	return append(objs, namespace)
}

func items(t *testing.T, list client.ObjectList) []client.Object {
	t.Helper()
	all, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]client.Object, 0, len(all))
	for _, o := range all {
		out = append(out, o.(client.Object))
	}
	return out
}

// writeManifests writes objs as YAML documents with apiVersion and kind, without managedFields.
func (h *harness) writeManifests(t *testing.T, file string, objs ...client.Object) {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, h.scheme)
		if err != nil {
			t.Fatal(err)
		}
		o = o.DeepCopyObject().(client.Object)
		o.GetObjectKind().SetGroupVersionKind(gvk)
		o.SetManagedFields(nil)
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(data)
	}
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}
